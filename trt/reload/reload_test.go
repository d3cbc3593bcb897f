package reload_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/trttest"
	"github.com/fsnotify/fsnotify"
)

func TestReloadRenameIntoPlaceTwice(t *testing.T) {
	h := newHarness(t, nil)
	h.start(model(1))
	h.wantServing(1, 1)

	h.replace("model.onnx", model(2))
	ev := h.expect(reload.OutcomeReloaded)
	if ev.Generation != 2 || ev.SHA256 != sha256.Sum256(model(2)) || ev.Target != "p0" || ev.Model != "demo" {
		t.Fatalf("event %+v", ev)
	}
	h.wantServing(2, 2)

	// The second replace must be seen too: a watch on the file itself
	// would have been lost with the first rename.
	h.replace("model.onnx", model(3))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(3, 3)
	if n := h.be.Loads(); n != 3 {
		t.Errorf("%d loads, want 3", n)
	}
	if s := h.r.Stats(); s.Reloaded != 2 || s.Rejected != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestReloadSlowInPlaceWriter(t *testing.T) {
	// The writer pauses far less than the debounce between chunks, as
	// cp, scp and rsync --inplace do on a busy machine.
	h := newHarness(t, func(o *reload.Options) {
		o.Debounce = 300 * time.Millisecond
		o.Settle = 100 * time.Millisecond
	})
	h.start(model(1))
	full := trttest.Spec{Value: 2, Pad: 512 << 10}.Bytes()
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(full); off += 8 << 10 {
		if _, err := f.Write(full[off:min(off+8<<10, len(full))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // the stimulus: a slow writer, not synchronisation
	}
	f.Close()
	h.note(full, true)
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
	h.checkLoadedComplete()
	if n := h.be.Loads(); n != 2 {
		t.Errorf("%d loads, want 2 (the initial one and the finished file)", n)
	}
}

func TestReloadRejections(t *testing.T) {
	good := model(1)
	cases := []struct {
		name    string
		content []byte
		want    error
	}{
		{"truncated", good[:len(good)/2], trt.ErrEngineInvalid},
		{"zero-length", []byte{}, trt.ErrEngineInvalid},
		{"wrong content", []byte("\x7fELF this is not a model\n"), trt.ErrEngineInvalid},
		{"other input shape", trttest.Spec{Value: 2, Inputs: []trt.TensorSpec{{Name: "x", Type: trt.Float32, Shape: []int64{1, 3, 32, 32}}}, Outputs: trttest.DefaultOutputs}.Bytes(), trt.ErrSignature},
		{"renamed input", trttest.Spec{Value: 2, Inputs: []trt.TensorSpec{{Name: "images", Type: trt.Float32, Shape: []int64{1, 3, 4, 4}}}, Outputs: trttest.DefaultOutputs}.Bytes(), trt.ErrSignature},
		{"other output size", trttest.Spec{Value: 2, Inputs: trttest.DefaultInputs, Outputs: []trt.TensorSpec{{Name: "y", Type: trt.Float32, Shape: []int64{1, 10}}}}.Bytes(), trt.ErrSignature},
		{"NaN output", trttest.Spec{Value: 2, NaN: true}.Bytes(), trt.ErrWarmup},
		{"Inf output", trttest.Spec{Value: 2, Inf: true}.Bytes(), trt.ErrWarmup},
		{"inference error", trttest.Spec{Value: 2, InferError: true}.Bytes(), trt.ErrWarmup},
		{"short output buffer", trttest.Spec{Value: 2, ShortOutput: true}.Bytes(), trt.ErrWarmup},
		{"output reshaped by inference", trttest.Spec{Value: 2, Reshape: true}.Bytes(), trt.ErrWarmup},
		{"load error", trttest.Spec{Value: 2, LoadError: "Magic tag does not match"}.Bytes(), trt.ErrEngineInvalid},
		{"version", trttest.Spec{Value: 2, VersionError: true}.Bytes(), trt.ErrVersion},
	}
	h := newHarness(t, nil)
	h.start(good)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.replace("model.onnx", c.content)
			ev := h.expect(reload.OutcomeRejected)
			if !errors.Is(ev.Reason, c.want) {
				t.Errorf("reason %v, want %v", ev.Reason, c.want)
			}
			if ev.Generation != 1 || ev.SHA256 != sha256.Sum256(c.content) {
				t.Errorf("event %+v: want generation 1 and the rejected content's hash", ev)
			}
			h.wantServing(1, 1)
		})
	}
	h.t = t
	s := h.r.Stats()
	if s.Rejected != uint64(len(cases)) || s.Reloaded != 0 {
		t.Errorf("stats %+v", s)
	}
	for _, r := range []string{trt.ReasonInvalid, trt.ReasonSignature, trt.ReasonWarmup, trt.ReasonVersion} {
		if s.RejectedBy[r] == 0 {
			t.Errorf("no rejection counted as %q: %v", r, s.RejectedBy)
		}
	}
	if live := h.be.Live(); live != 1 {
		t.Errorf("%d live engines after the rejections, want 1 (every staged engine closed)", live)
	}
	// Still reloads good content afterwards.
	h.replace("model.onnx", model(5))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(5, 2)
}

func TestReloadStorm(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Debounce = 250 * time.Millisecond })
	h.start(model(0))
	const n = 100
	for i := 1; i <= n; i++ {
		h.replace("model.onnx", model(float32(i)))
		time.Sleep(10 * time.Millisecond) // the stimulus: 100 changes in about 1 s
	}
	final := sha256.Sum256(model(n))
	for {
		ev := h.expect(reload.OutcomeReloaded)
		if ev.SHA256 == final {
			break
		}
	}
	v, _ := h.serving()
	if v != n {
		t.Fatalf("serving value %v, want the last content %d", v, n)
	}
	// A loaded machine may stall the writer past the debounce a few times.
	if loads := h.be.Loads() - 1; loads > 5 {
		t.Errorf("%d loads for a storm of %d changes, want a few", loads, n)
	}
	t.Logf("%d loads for %d changes", h.be.Loads()-1, n)
}

// k8sSwap publishes content the way a Kubernetes ConfigMap or Secret
// volume does: a new timestamped folder, a ..data_tmp symlink to it
// renamed over ..data, the old folder removed. model.onnx itself is a
// symlink to ..data/model.onnx and gets no event.
func k8sSwap(t *testing.T, h *harness, stamp string, data []byte) {
	t.Helper()
	dir := filepath.Join(h.dir, stamp)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(h.dir, "..data"))
	tmp := filepath.Join(h.dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(h.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
	h.note(data, true)
}

func TestReloadSymlinkDataSwap(t *testing.T) {
	h := newHarness(t, nil)
	k8sSwap(t, h, "..2026_01_01_00_00_00.1", model(1))
	if err := os.Symlink("..data/model.onnx", h.path); err != nil {
		t.Fatal(err)
	}
	h.start(nil)
	h.wantServing(1, 1)

	k8sSwap(t, h, "..2026_01_01_00_01_00.2", model(2))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
	// Trigger is a barrier: its check reports "unchanged" after every
	// check the swap's events caused; none of them may have loaded again.
	h.r.Trigger()
	h.expect(reload.OutcomeUnchanged)
	if n := h.be.Loads(); n != 2 {
		t.Errorf("%d loads, want exactly one reload after the swap", n-1)
	}

	k8sSwap(t, h, "..2026_01_01_00_02_00.3", model(3))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(3, 3)
}

func TestReloadSymlinkElsewhereInPlace(t *testing.T) {
	// model.onnx -> ../store/current.onnx, then current.onnx is rewritten
	// in place: the event happens in the store folder.
	h := newHarness(t, nil)
	store := filepath.Join(filepath.Dir(h.dir), filepath.Base(h.dir)+"-store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(store) })
	target := filepath.Join(store, "current.onnx")
	if err := os.WriteFile(target, model(1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, h.path); err != nil {
		t.Fatal(err)
	}
	h.note(model(1), true)
	h.start(nil)
	h.settled() // the first check installs the watch on the store folder
	if err := os.WriteFile(target, model(2), 0o644); err != nil {
		t.Fatal(err)
	}
	h.note(model(2), true)
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
}

func TestReloadDeleteAndReappear(t *testing.T) {
	h := newHarness(t, nil)
	h.start(model(1))
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	h.op()
	ev := h.expect(reload.OutcomeMissing)
	if !errors.Is(ev.Reason, fs.ErrNotExist) || ev.Generation != 1 {
		t.Fatalf("event %v", ev)
	}
	h.wantServing(1, 1)

	// Back with the same content: nothing to load, but the runtime learns
	// the file is back.
	h.replace("model.onnx", model(1))
	h.expect(reload.OutcomeUnchanged)
	if n := h.be.Loads(); n != 1 {
		t.Fatalf("%d loads, want 1", n)
	}

	os.Remove(h.path)
	h.op()
	h.expect(reload.OutcomeMissing)
	h.replace("model.onnx", model(2))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
	if s := h.r.Stats(); s.Missing != 2 {
		t.Errorf("stats %+v, want 2 missing", s)
	}
}

func TestReloadOverflowRescan(t *testing.T) {
	h := newHarness(t, nil)
	h.r.UseWatcher(deafWatcher)
	h.start(model(1))
	h.settled() // the worker's first check, with the deaf watcher installed
	h.replace("model.onnx", model(2))
	h.r.InjectWatchError(fsnotify.ErrEventOverflow)
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
	if s := h.r.Stats(); s.Rescans != 1 || s.WatchErrors != 1 {
		t.Errorf("stats %+v, want one rescan", s)
	}
	// Any other watcher error also forces a rescan.
	h.replace("model.onnx", model(3))
	h.r.InjectWatchError(errors.New("inotify: read error"))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(3, 3)
}

func TestReloadPeriodicRescan(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Rescan = 200 * time.Millisecond })
	h.r.UseWatcher(deafWatcher)
	h.start(model(1))
	h.replace("model.onnx", model(2))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
}

func TestReloadPollingFallback(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Poll = 200 * time.Millisecond })
	h.r.FailWatcher(fmt.Errorf("inotify_init1: %w", syscall.EMFILE))
	h.start(model(1))
	ev := h.expect(reload.OutcomePolling)
	if !errors.Is(ev.Reason, syscall.EMFILE) || !strings.Contains(ev.Reason.Error(), "max_user_instances") {
		t.Fatalf("polling event %v: want the cause and what to raise", ev)
	}
	if !h.r.Stats().Polling {
		t.Error("stats do not say polling")
	}
	h.replace("model.onnx", model(2))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
}

func TestReloadWatchesFolderAgain(t *testing.T) {
	// The model folder disappears and comes back, and the folder above
	// cannot be watched: the reloader polls meanwhile and watches again
	// afterwards.
	h := newHarness(t, func(o *reload.Options) { o.Poll = 200 * time.Millisecond })
	h.r.UseWatcher(refusing(filepath.Dir(h.dir)))
	h.start(model(1))
	h.settled()
	if err := os.RemoveAll(h.dir); err != nil {
		t.Fatal(err)
	}
	h.op()
	got := map[reload.Outcome]bool{h.next().Outcome: true, h.next().Outcome: true}
	if !got[reload.OutcomeMissing] || !got[reload.OutcomePolling] {
		t.Fatalf("outcomes %v, want missing and polling", got)
	}
	if err := os.Mkdir(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.expect(reload.OutcomeWatching)
	h.replace("model.onnx", model(2))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
}

func TestReloadIdenticalContent(t *testing.T) {
	h := newHarness(t, nil)
	h.start(model(1))
	h.replace("model.onnx", model(1)) // new inode, same bytes
	h.settled()
	now := time.Now()
	os.Chtimes(h.path, now, now) // touch
	h.op()
	h.settled()
	h.noEvent()
	if n := h.be.Loads(); n != 1 {
		t.Fatalf("%d loads, want 1: identical content must not reload", n)
	}
	if s := h.r.Stats(); s.Unchanged < 2 {
		t.Errorf("stats %+v, want 2 unchanged checks", s)
	}
}

func TestReloadQuarantine(t *testing.T) {
	h := newHarness(t, nil)
	h.start(model(1))
	bad := trttest.Spec{Value: 2, NaN: true}.Bytes()
	h.replace("model.onnx", bad)
	h.expect(reload.OutcomeRejected)
	loads := h.be.Loads()

	// The same bad bytes again, and a touch: not loaded again.
	h.replace("model.onnx", bad)
	h.settled()
	h.noEvent()
	if n := h.be.Loads(); n != loads {
		t.Fatalf("quarantined content loaded again (%d loads, want %d)", n, loads)
	}
	if s := h.r.Stats(); s.Quarantined != 1 {
		t.Errorf("stats %+v, want 1 quarantined", s)
	}

	// A manual reload says it is unchanged since its rejection, and why
	// it was refused, without judging it again (issue 19: a second
	// engine_rejected came after the same wait).
	h.r.Trigger()
	ev := h.expect(reload.OutcomeUnchanged)
	if !errors.Is(ev.Reason, trt.ErrWarmup) || !strings.Contains(ev.Reason.Error(), "unchanged since it was rejected") {
		t.Fatalf("event %v", ev)
	}
	if n := h.be.Loads(); n != loads {
		t.Fatalf("the manual reload judged the quarantined content again (%d loads, want %d)", n, loads)
	}

	// New bad bytes are tried, new good bytes are installed.
	h.replace("model.onnx", trttest.Spec{Value: 3, NaN: true}.Bytes())
	h.expect(reload.OutcomeRejected)
	h.replace("model.onnx", model(4))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(4, 2)
	// The old bad content after a good one is tried again (the file
	// changed since it was quarantined).
	h.replace("model.onnx", bad)
	h.expect(reload.OutcomeRejected)
}

func TestReloadMemoryBudget(t *testing.T) {
	var refuse = make(chan bool, 1)
	refuse <- true
	h := newHarness(t, func(o *reload.Options) {
		o.Rescan = 200 * time.Millisecond
		o.Budget = func(n int64) error {
			r := <-refuse
			refuse <- r
			if r {
				return fmt.Errorf("%w: %d bytes do not fit", trt.ErrMemory, n)
			}
			return nil
		}
	})
	<-refuse
	refuse <- false
	h.start(model(1))
	<-refuse
	refuse <- true
	h.replace("model.onnx", model(2))
	ev := h.expect(reload.OutcomeRejected)
	if !errors.Is(ev.Reason, trt.ErrMemory) || trt.RejectReason(ev.Reason) != trt.ReasonMemory {
		t.Fatalf("event %v", ev)
	}
	loads := h.be.Loads()
	if loads != 1 {
		t.Fatalf("%d loads: the budget must be checked before loading", loads)
	}
	// Memory is transient: not quarantined, retried at the rescan.
	h.expect(reload.OutcomeRejected)
	<-refuse
	refuse <- false
	for {
		ev := h.next()
		if ev.Outcome == reload.OutcomeReloaded {
			break
		}
		if ev.Outcome != reload.OutcomeRejected {
			t.Fatalf("event %v", ev)
		}
	}
	h.wantServing(2, 2)
}

func TestLoadErrors(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		h := newHarness(t, nil)
		err := h.r.Load(context.Background())
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), h.path) {
			t.Fatalf("error %v: want ErrNotExist naming %s", err, h.path)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		h := newHarness(t, nil)
		h.replace("model.onnx", []byte("garbage"))
		err := h.r.Load(context.Background())
		if !errors.Is(err, trt.ErrEngineInvalid) || !strings.Contains(err.Error(), h.path) || !strings.Contains(err.Error(), "demo") {
			t.Fatalf("error %v: want ErrEngineInvalid naming model and file", err)
		}
		if h.hot.Current() != nil {
			t.Fatal("an engine was installed")
		}
	})
	t.Run("signature", func(t *testing.T) {
		h := newHarness(t, func(o *reload.Options) {})
		opts := h.opts
		opts.Targets = []reload.Target{{Name: "p0", Hot: h.hot, Want: trt.Signature{
			Inputs:  []trt.TensorSpec{{Name: "x", Type: trt.Float32, Shape: []int64{1, 3, 8, 8}}},
			Outputs: trttest.DefaultOutputs,
		}}}
		r, err := reload.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		h.replace("model.onnx", model(1))
		err = r.Load(context.Background())
		if !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), "pipeline p0") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("pins the signature", func(t *testing.T) {
		h := newHarness(t, nil)
		h.start(model(1))
		want := trttest.Spec{}.Signature()
		if err := h.r.Want(0).Check(want); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNewReloaderOptions(t *testing.T) {
	be := trttest.NewBackend()
	hot := &trt.Hot{}
	for _, o := range []reload.Options{
		{Backend: be, Targets: []reload.Target{{Hot: hot}}},
		{Path: "m.onnx", Targets: []reload.Target{{Hot: hot}}},
		{Path: "m.onnx", Backend: be},
		{Path: "m.onnx", Backend: be, Targets: []reload.Target{{Name: "p"}}},
	} {
		if _, err := reload.New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestReloadCloseCancelsStaging(t *testing.T) {
	h := newHarness(t, nil)
	h.start(model(1))
	loading := make(chan struct{})
	h.be.OnLoad = func(ctx context.Context, b []byte) error {
		if strings.Contains(string(b), "delay") {
			close(loading)
		}
		return nil
	}
	h.replace("model.onnx", trttest.Spec{Value: 2, Delay: time.Minute}.Bytes())
	select {
	case <-loading:
	case <-time.After(waitLong):
		t.Fatal("staging did not start")
	}
	done := make(chan struct{})
	go func() {
		h.r.Close()
		h.r.Close() // idempotent
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitLong):
		t.Fatal("Close did not cancel the staging")
	}
	h.noEvent() // cancellation is not a rejection
	h.wantServing(1, 1)
	h.r.Start() // after Close: nothing
	h.r.Trigger()
}

func TestReloadCloseBeforeStart(t *testing.T) {
	h := newHarness(t, nil)
	h.r.Close()
	h.r.Start()
	h.r.Close()
}

func TestReloadMultipleTargets(t *testing.T) {
	h := newHarness(t, nil)
	hot2 := &trt.Hot{}
	defer hot2.Close()
	opts := h.opts
	opts.Targets = []reload.Target{{Name: "a", Hot: h.hot}, {Name: "b", Hot: hot2}}
	r, err := reload.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h.replace("model.onnx", model(1))
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Start()
	h.replace("model.onnx", model(2))
	seen := map[string]uint64{}
	for len(seen) < 2 {
		ev := h.expect(reload.OutcomeReloaded)
		seen[ev.Target] = ev.Generation
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Fatalf("generations %v", seen)
	}
	ga, gb := h.hot.Acquire(), hot2.Acquire()
	defer ga.Release()
	defer gb.Release()
	if ga.Engine == gb.Engine {
		t.Fatal("two targets share one engine")
	}
	if h.be.MaxConcurrentLoads() != 1 {
		t.Errorf("%d stagings at once", h.be.MaxConcurrentLoads())
	}
}

func TestStagingGateAcrossReloaders(t *testing.T) {
	// Two reloaders sharing the default process-wide gate stage one
	// engine at a time even when both files change at once.
	be := trttest.NewBackend()
	dir := t.TempDir()
	events := make(chan reload.Event, 16)
	var rs []*reload.Reloader
	for _, name := range []string{"a.onnx", "b.onnx"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, model(1), 0o644); err != nil {
			t.Fatal(err)
		}
		hot := &trt.Hot{}
		t.Cleanup(hot.Close)
		r, err := reload.New(reload.Options{
			Path: p, Backend: be, Targets: []reload.Target{{Hot: hot}},
			Debounce: 50 * time.Millisecond, Settle: 10 * time.Millisecond, Rescan: -1,
			Budget:  func(int64) error { return nil },
			OnEvent: func(ev reload.Event) { events <- ev },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		if err := r.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.Start()
		rs = append(rs, r)
	}
	slow := trttest.Spec{Value: 2, Delay: 300 * time.Millisecond}.Bytes()
	for _, name := range []string{"a.onnx", "b.onnx"} {
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), slow, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name))
	}
	for range rs {
		select {
		case ev := <-events:
			if ev.Outcome != reload.OutcomeReloaded {
				t.Fatalf("event %v", ev)
			}
		case <-time.After(waitLong):
			t.Fatal("no reload")
		}
	}
	if n := be.MaxConcurrentLoads(); n != 1 {
		t.Fatalf("%d engines staged at once, want 1", n)
	}
}
