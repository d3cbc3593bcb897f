package reload_test

import (
	"fmt"
	"github.com/fsnotify/fsnotify"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt/reload"
	"golang.org/x/sys/unix"
)

// The delivery tests replace the folder the model file is in, as OTA tools
// (Mender, RAUC, SWUpdate, a shell script) deliver a model set: the watch
// on that folder follows the old folder, so the Reloader must see the swap
// from the folder above.

// mkModelDir makes folder rel under h.dir holding model.onnx = data.
func mkModelDir(t *testing.T, h *harness, rel string, data []byte) {
	t.Helper()
	dir := filepath.Join(h.dir, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flip points symlink rel at target by renaming a temporary symlink over
// it (ln -sfn is not atomic; this is what A/B tools do).
func flip(t *testing.T, h *harness, rel, target string) {
	t.Helper()
	tmp := filepath.Join(h.dir, rel+".tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, rel)); err != nil {
		t.Fatal(err)
	}
	h.op()
}

// exactlyOne checks that the swap caused one load: Trigger's check comes
// after every check the swap's events caused and reports "unchanged".
func exactlyOne(t *testing.T, h *harness, loads int) {
	t.Helper()
	h.r.Trigger()
	h.expect(reload.OutcomeUnchanged)
	if n := h.be.Loads(); n != loads {
		t.Fatalf("%d loads, want %d", n, loads)
	}
}

// TestReloadSymlinkFlipABSlots: the model path goes through a symlink to
// a folder (opt/current -> a), and updates are written to the other slot
// and published by flipping the symlink; the old slot stays. Before, the
// folder watch followed slot a, the flip itself gave no event, and the
// new model was found only by the 30 s rescan (off here) or at the next
// write to the old slot: one swap late.
func TestReloadSymlinkFlipABSlots(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Path = "opt/current/model.onnx" })
	mkModelDir(t, h, "opt/a", model(1))
	if err := os.Symlink("a", filepath.Join(h.dir, "opt/current")); err != nil {
		t.Fatal(err)
	}
	h.note(model(1), true)
	h.start(nil)
	h.wantServing(1, 1)
	loads := 1
	for i, slot := range []string{"b", "a", "b", "a"} {
		v := float32(i + 2)
		mkModelDir(t, h, "opt/"+slot, model(v)) // the inactive slot, in place
		h.note(model(v), true)
		flip(t, h, "opt/current", slot)
		h.expect(reload.OutcomeReloaded)
		loads++
		h.wantServing(v, uint64(loads))
		exactlyOne(t, h, loads)
	}
	h.checkLoadedComplete()
}

// TestReloadDirRenameSwap: models.new is written, models renamed away
// and models.new renamed to models, with a pause between the two renames
// longer than the debounce (a tool that syncs in between). The folder is
// missing for a moment; the second rename must be seen at once, without
// falling back to polling.
func TestReloadDirRenameSwap(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Path = "models/model.onnx" })
	mkModelDir(t, h, "models", model(1))
	h.note(model(1), true)
	h.start(nil)
	for i := range 3 {
		v := float32(i + 2)
		mkModelDir(t, h, "models.new", model(v))
		h.note(model(v), true)
		if err := os.Rename(filepath.Join(h.dir, "models"), filepath.Join(h.dir, "models.old")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * h.opts.Debounce) // the stimulus: a slow tool
		t0 := time.Now()
		if err := os.Rename(filepath.Join(h.dir, "models.new"), filepath.Join(h.dir, "models")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(h.dir, "models.old")); err != nil {
			t.Fatal(err)
		}
		h.op()
		for {
			ev := h.next()
			if ev.Outcome == reload.OutcomePolling {
				t.Fatalf("swap %d: fell back to polling: %v", i, ev.Reason)
			}
			if ev.Outcome == reload.OutcomeReloaded {
				break
			}
			if ev.Outcome != reload.OutcomeMissing && ev.Outcome != reload.OutcomeWatching {
				t.Fatalf("swap %d: event %v", i, ev)
			}
		}
		if d := time.Since(t0); d > time.Second+h.opts.Debounce {
			t.Errorf("swap %d: reloaded %s after the folder came back; want about the debounce", i, d)
		}
		h.wantServing(v, uint64(i+2))
		exactlyOne(t, h, i+2)
	}
	if s := h.r.Stats(); s.Polling {
		t.Errorf("stats %+v: still polling", s)
	}
}

// TestReloadDirExchangeSwap: models and models.new swapped in one step
// with renameat2(RENAME_EXCHANGE).
func TestReloadDirExchangeSwap(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Path = "models/model.onnx" })
	mkModelDir(t, h, "models", model(1))
	h.note(model(1), true)
	h.start(nil)
	for i := range 3 {
		v := float32(i + 2)
		mkModelDir(t, h, "models.new", model(v))
		h.note(model(v), true)
		err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(h.dir, "models.new"), unix.AT_FDCWD, filepath.Join(h.dir, "models"), unix.RENAME_EXCHANGE)
		if err != nil {
			t.Skipf("renameat2(RENAME_EXCHANGE): %v", err)
		}
		if err := os.RemoveAll(filepath.Join(h.dir, "models.new")); err != nil {
			t.Fatal(err)
		}
		h.op()
		h.expect(reload.OutcomeReloaded)
		h.wantServing(v, uint64(i+2))
		exactlyOne(t, h, i+2)
	}
}

// refusing returns a real fsnotify watcher that cannot watch folder.
func refusing(folder string) func() (reload.TestWatcher, error) {
	return func() (reload.TestWatcher, error) {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, err
		}
		return refuse{deaf{w}, folder}, nil
	}
}

type refuse struct {
	deaf
	folder string
}

func (r refuse) Add(name string) error {
	if filepath.Clean(name) == r.folder {
		return fmt.Errorf("inotify_add_watch %s: %w", name, syscall.EACCES)
	}
	return r.w.Add(name)
}
func (r refuse) Events() <-chan fsnotify.Event { return r.w.Events }

// TestReloadFolderGoneAndBack: the model folder disappears and comes back
// while the folder above is watched: the file is reported missing, the
// reloader does not poll, and the folder's return is seen at once.
func TestReloadFolderGoneAndBack(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Path = "models/model.onnx" })
	mkModelDir(t, h, "models", model(1))
	h.note(model(1), true)
	h.start(nil)
	h.settled()
	if err := os.RemoveAll(filepath.Join(h.dir, "models")); err != nil {
		t.Fatal(err)
	}
	h.op()
	h.expect(reload.OutcomeMissing)
	mkModelDir(t, h, "models", model(2))
	h.note(model(2), true)
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
	if s := h.r.Stats(); s.Polling {
		t.Errorf("stats %+v: polling", s)
	}
}

// TestReloadSwapHigherUp: the folder two levels above the model file is
// swapped (top/models/model.onnx, top renamed to top.old, which stays,
// and top.new renamed to top). The folder above the model's folder reports its own move; then the
// model's folder watch must follow the new folder too, or a later
// replacement of the file there goes unseen (rescans are off here).
func TestReloadSwapHigherUp(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) { o.Path = "top/models/model.onnx" })
	mkModelDir(t, h, "top/models", model(1))
	h.note(model(1), true)
	h.start(nil)
	h.settled()
	mkModelDir(t, h, "top.new/models", model(2))
	h.note(model(2), true)
	if err := os.Rename(filepath.Join(h.dir, "top"), filepath.Join(h.dir, "top.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, "top.new"), filepath.Join(h.dir, "top")); err != nil {
		t.Fatal(err)
	}
	h.op() // top.old stays: a rollback slot
	h.expect(reload.OutcomeReloaded)
	h.wantServing(2, 2)
	h.replace("top/models/model.onnx", model(3))
	h.expect(reload.OutcomeReloaded)
	h.wantServing(3, 3)
}
