package reload_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/trttest"
)

// writeInPlaceWithPause truncates the model file and writes data into it
// in place (same inode, as cp, scp and shell redirection do): the first
// half, a pause, then the rest.
func writeInPlaceWithPause(t *testing.T, h *harness, data []byte, pause time.Duration) {
	t.Helper()
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	h.op()
	time.Sleep(pause) // the stimulus: a writer that stalls, not synchronisation
	if _, err := f.Write(data[len(data)/2:]); err != nil {
		t.Fatal(err)
	}
	h.note(data, true)
}

// TestReloadInPlaceWriterPauses (issue 10, finding 3): a writer that writes
// half the file in place, pauses for 3 s (far beyond the debounce and the
// settle time) and writes the rest. The half file is read and refused, but
// it was modified in place moments before and grows within the grace
// period, so that refusal is not final: no engine_rejected, and the whole
// file is installed.
func TestReloadInPlaceWriterPauses(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Grace = 0 }) // the default, 10 s
	h.start(model(1))
	full := trttest.Spec{Value: 2, Pad: 256 << 10}.Bytes()
	writeInPlaceWithPause(t, h, full, 3*time.Second)
	incomplete := false
	for {
		ev := h.next()
		if ev.Outcome == reload.OutcomeReloaded {
			break
		}
		if ev.Outcome == reload.OutcomeRejected {
			t.Fatalf("the half-written file was rejected: %v", ev)
		}
		if ev.Reason != nil && strings.Contains(ev.Reason.Error(), "incomplete?") {
			incomplete = true
		}
	}
	h.wantServing(2, 2)
	if !incomplete {
		t.Error(`no event said the file read was "incomplete?"`)
	}
	if s := h.r.Stats(); s.Rejected != 0 || s.Reloaded != 1 {
		t.Errorf("stats %+v: want no rejection and one reload", s)
	}
}

// TestLoadWaitsForInPlaceWriter: at start, a model file that is being
// written in place (modified a moment ago, refused as it is) is waited for
// within the grace period instead of failing the start.
func TestLoadWaitsForInPlaceWriter(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Grace = 0 }) // the default, 10 s
	full := trttest.Spec{Value: 3, Pad: 64 << 10}.Bytes()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		f.Write(full[:len(full)/2])
		time.Sleep(2 * time.Second)
		f.Write(full[len(full)/2:])
	}()
	time.Sleep(200 * time.Millisecond) // the first half is there
	if err := h.r.Load(context.Background()); err != nil {
		t.Fatalf("Load: %v", err)
	}
	<-done
	h.wantServing(3, 1)
}

// TestReloadInPlaceWriterPausesPastGrace: a writer that stalls for longer
// than the grace period gets its half file rejected, and the rejection
// says it may be incomplete; the finished file is installed when it comes.
func TestReloadInPlaceWriterPausesPastGrace(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Grace = 500 * time.Millisecond })
	h.start(model(1))
	full := trttest.Spec{Value: 2, Pad: 64 << 10}.Bytes()
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeInPlaceWithPause(t, h, full, 2500*time.Millisecond)
	}()
	// Pending at once (issue 19: the refusal was held 10 s in silence),
	// saying until when; then the rejection.
	t0 := time.Now()
	ev := h.expect(reload.OutcomePending)
	if !errors.Is(ev.Reason, trt.ErrEngineInvalid) || ev.Until.Before(t0) || ev.Until.After(t0.Add(time.Second)) || ev.Serving == ev.SHA256 || ev.Generation != 1 {
		t.Fatalf("pending %v until %v: want ErrEngineInvalid, judged within the grace, generation 1 serving", ev, ev.Until)
	}
	ev = h.expect(reload.OutcomeRejected)
	if !errors.Is(ev.Reason, trt.ErrEngineInvalid) || !strings.Contains(ev.Reason.Error(), "incomplete?") || !strings.Contains(ev.Reason.Error(), "modified in place") {
		t.Fatalf("rejection %v: want ErrEngineInvalid saying the file written in place may be incomplete", ev)
	}
	if time.Now().Before(ev.Until) && !ev.Until.IsZero() {
		t.Errorf("rejected before the time pending said")
	}
	<-done
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
}

// TestReloadRenamedBadFileNotHeld: a file renamed into place is complete
// by construction, so its rejection is not held for the grace period.
func TestReloadRenamedBadFileNotHeld(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Grace = time.Hour })
	h.start(model(1))
	h.replace("model.onnx", model(2)[:20])
	ev := h.expect(reload.OutcomeRejected)
	if strings.Contains(ev.Reason.Error(), "incomplete?") {
		t.Errorf("rejection of a renamed file says incomplete?: %v", ev)
	}
}
