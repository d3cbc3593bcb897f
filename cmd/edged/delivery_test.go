package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt/demomodel"
)

// The delivery tests run the real binary on a model delivered the way the
// fleet's tools deliver it, and perform each tool's exact sequence of
// file operations many times: a Kubernetes ConfigMap/Secret/projected
// volume update (pkg/volume/util/atomic_writer.go), an OTA swap of the
// whole model folder (rename away and rename in, or renameat2
// RENAME_EXCHANGE) and an A/B symlink flip. Every swap must give exactly
// one outcome: engine_reloaded for a good model, engine_rejected for a
// corrupt one (the engine serving stays); a model written slowly into the
// new folder before the swap must never be read half-written; and frames
// must keep flowing: every frame, in order, on the socket.

// deliverySwaps is how many swaps each test performs.
const deliverySwaps = 50

// slowPause is how long a slow writer stops in the middle of the model
// file: longer than edged's debounce and settle together (250 + 100 ms),
// so a watcher that looked at the half-written file would read it.
const slowPause = 400 * time.Millisecond

// writeModelFile writes data to path; slow writes half, pauses, then the
// rest, as a download or a copy over a slow link does.
func writeModelFile(t *testing.T, path string, data []byte, slow bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if slow {
		time.Sleep(slowPause) // the stimulus: a writer stalled halfway
	}
	if _, err := f.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// publisher delivers a new version of the model (and a labels file next
// to it) with a tool's sequence of operations.
type publisher func(t *testing.T, i int, data []byte, slow bool)

// k8sVolume is a Kubernetes atomic-writer volume (ConfigMap, Secret,
// projected, downward API) mounted at dir, holding model.onnx and
// labels.txt. Its write replays AtomicWriter.Write: a new timestamped
// folder made with MkdirTemp ("..2006_01_02_15_04_05." plus a random
// suffix) and chmod 0755, the payload written into it (WriteFile, then
// Chmod), the user-visible symlinks created when missing (model.onnx ->
// ..data/model.onnx), a ..data_tmp symlink to the new folder renamed over
// ..data, and the old timestamped folder removed.
type k8sVolume struct{ dir string }

func (v k8sVolume) write(t *testing.T, i int, data []byte, slow bool) {
	t.Helper()
	old, err := os.Readlink(filepath.Join(v.dir, "..data"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	ts, err := os.MkdirTemp(v.dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	writeModelFile(t, filepath.Join(ts, "model.onnx"), data, slow)
	if err := os.Chmod(filepath.Join(ts, "model.onnx"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "labels.txt"), fmt.Appendf(nil, "version %d\n", i), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"labels.txt", "model.onnx"} {
		if _, err := os.Readlink(filepath.Join(v.dir, name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveryCase is one delivery method: setup lays out the first version
// under root and returns the model path for edged's configuration and
// the publisher of later versions.
type deliveryCase struct {
	setup func(t *testing.T, root string, first []byte) (modelPath string, publish publisher)
	// missingOK: an engine_file_missing may come between two swaps (the
	// folder is absent between the two renames of a folder swap).
	missingOK bool
}

// TestDeliveryK8sDataSwap: the model comes from a ConfigMap volume
// mounted at /models and edged is configured with /models/model.onnx
// (the user-visible symlink).
func TestDeliveryK8sDataSwap(t *testing.T) {
	runDelivery(t, deliveryCase{setup: func(t *testing.T, root string, first []byte) (string, publisher) {
		v := k8sVolume{dir: filepath.Join(root, "models")}
		if err := os.Mkdir(v.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		v.write(t, 0, first, false)
		return filepath.Join(v.dir, "model.onnx"), v.write
	}})
}

// TestDeliveryDirSwap: an OTA tool writes the new set to models.new and
// swaps the folders: models renamed to models.old, models.new renamed to
// models, models.old removed; every third swap is one
// renameat2(RENAME_EXCHANGE) instead. edged is configured with
// opt/models/model.onnx.
func TestDeliveryDirSwap(t *testing.T) {
	runDelivery(t, deliveryCase{missingOK: true, setup: func(t *testing.T, root string, first []byte) (string, publisher) {
		base := filepath.Join(root, "opt")
		cur, next, old := filepath.Join(base, "models"), filepath.Join(base, "models.new"), filepath.Join(base, "models.old")
		if err := os.MkdirAll(cur, 0o755); err != nil {
			t.Fatal(err)
		}
		writeModelFile(t, filepath.Join(cur, "model.onnx"), first, false)
		return filepath.Join(cur, "model.onnx"), func(t *testing.T, i int, data []byte, slow bool) {
			if err := os.Mkdir(next, 0o755); err != nil {
				t.Fatal(err)
			}
			writeModelFile(t, filepath.Join(next, "model.onnx"), data, slow)
			if err := os.WriteFile(filepath.Join(next, "labels.txt"), fmt.Appendf(nil, "version %d\n", i), 0o644); err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				if err := unix.Renameat2(unix.AT_FDCWD, next, unix.AT_FDCWD, cur, unix.RENAME_EXCHANGE); err != nil {
					t.Fatalf("renameat2(RENAME_EXCHANGE): %v", err)
				}
				if err := os.RemoveAll(next); err != nil { // the old set
					t.Fatal(err)
				}
				return
			}
			if err := os.Rename(cur, old); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(next, cur); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(old); err != nil {
				t.Fatal(err)
			}
		}
	}})
}

// TestDeliverySymlinkFlip: A/B slots, opt/a and opt/b, and a symlink
// opt/current to the active one; an update empties and writes the
// inactive slot and flips the symlink by renaming a temporary symlink over
// it. edged is configured with opt/current/model.onnx.
func TestDeliverySymlinkFlip(t *testing.T) {
	runDelivery(t, deliveryCase{setup: func(t *testing.T, root string, first []byte) (string, publisher) {
		base := filepath.Join(root, "opt")
		if err := os.MkdirAll(filepath.Join(base, "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeModelFile(t, filepath.Join(base, "a", "model.onnx"), first, false)
		if err := os.Symlink("a", filepath.Join(base, "current")); err != nil {
			t.Fatal(err)
		}
		active := "a"
		return filepath.Join(base, "current", "model.onnx"), func(t *testing.T, i int, data []byte, slow bool) {
			slot := map[string]string{"a": "b", "b": "a"}[active]
			dir := filepath.Join(base, slot)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeModelFile(t, filepath.Join(dir, "model.onnx"), data, slow)
			tmp := filepath.Join(base, "current.tmp")
			if err := os.Symlink(slot, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(base, "current")); err != nil {
				t.Fatal(err)
			}
			active = slot
		}
	}})
}

// runDelivery starts edged on the first version and publishes
// deliverySwaps more: good models alternate between two variants, every
// seventh is corrupt (truncated, junk, or a model whose outputs are NaN),
// and every fifth is written slowly.
func runDelivery(t *testing.T, c deliveryCase) {
	lib := needORT(t)
	t0 := time.Now()
	var good [2][]byte
	for i := range good {
		var err error
		if good[i], err = demomodel.Variant(i + 1); err != nil {
			t.Fatal(err)
		}
	}
	nan, err := demomodel.Build(demomodel.Options{NaN: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model, publish := c.setup(t, dir, good[0])
	cfg, sock := testConfig(t, dir,
		`path = "builtin:demo" `, `path = "`+model+`" `,
		"\nwidth = 640 ", "\nwidth = 160 ", "height = 480\n", "height = 120\n",
		`schedule = "latest"`, `schedule = "queue"`, "queue = 4 ", "queue = 64 ")
	d := start(t, lib, cfg, sock, "STATE_DIRECTORY=")
	r := readRecords(t, sock)
	first := r.results(t, "demo", 0, 1)[0]
	gen := first.Engine.Generation
	sha := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	if !strings.HasPrefix(sha(good[0]), first.Engine.SHA256) || first.Engine.SHA256 == "" {
		t.Fatalf("first engine %+v is not the first version", first.Engine)
	}
	isOutcome := func(d stream.Decoded) bool {
		return d.Type == "status" && (d.Event == "engine_reloaded" || d.Event == "engine_rejected")
	}
	serving, from := 0, r.len()
	var reloads, rejects, slow int
	for i := 1; i <= deliverySwaps; i++ {
		data, bad := good[1-serving], false
		if i%7 == 3 {
			bad = true
			switch i % 3 {
			case 0:
				data = good[serving][:len(good[serving])/2+i] // torn
			case 1:
				data = fmt.Appendf(nil, "not a model, swap %d\n", i)
			default:
				data = nan
			}
		}
		isSlow := i%5 == 1
		if isSlow {
			slow++
		}
		publish(t, i, data, isSlow)
		at := r.wait(t, fmt.Sprintf("the outcome of swap %d", i), from, isOutcome)
		ev := r.since(at)[0]
		from = at + 1
		if bad {
			rejects++
			if ev.Event != "engine_rejected" || ev.Engine == nil || ev.Engine.Generation != gen {
				t.Fatalf("swap %d (corrupt): %s %+v (%s), want engine_rejected with generation %d still serving", i, ev.Event, ev.Engine, ev.Reason, gen)
			}
			continue
		}
		reloads++
		gen++
		if ev.Event != "engine_reloaded" || ev.Engine == nil || ev.Engine.Generation != gen || !strings.HasPrefix(sha(data), ev.Engine.SHA256) {
			t.Fatalf("swap %d: %s %+v (%s), want engine_reloaded of generation %d, sha256 %.12s", i, ev.Event, ev.Engine, ev.Reason, gen, sha(data))
		}
		serving = 1 - serving
	}
	// Any late extra check of the last swap has run by now.
	time.Sleep(time.Second)
	end := r.len()
	last := r.results(t, "demo", end, 5)
	if g := last[len(last)-1].Engine.Generation; g != gen {
		t.Errorf("results on generation %d after the last swap, want %d", g, gen)
	}
	d.alive(t)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}

	// Exactly one outcome per swap, and nothing else but missing files
	// where the method has a moment without the folder.
	counts := map[string]int{}
	var frames []uint64
	for _, rec := range r.since(0) {
		switch {
		case rec.Type == "status" && strings.HasPrefix(rec.Event, "engine_"):
			counts[rec.Event]++
		case rec.Type == "result" && rec.Pipeline == "demo":
			frames = append(frames, rec.FrameSeq)
		}
	}
	if counts["engine_reloaded"] != reloads || counts["engine_rejected"] != rejects {
		t.Errorf("status events %v, want %d engine_reloaded and %d engine_rejected: one per swap", counts, reloads, rejects)
	}
	for ev, n := range counts {
		if ev != "engine_reloaded" && ev != "engine_rejected" && !(c.missingOK && ev == "engine_file_missing") && !(c.missingOK && ev == "engine_watch_ok") {
			t.Errorf("%d %s events", n, ev)
		}
	}
	for i := 1; i < len(frames); i++ {
		if frames[i] != frames[i-1]+1 {
			t.Fatalf("frame %d followed by %d: frames were dropped", frames[i-1], frames[i])
		}
	}
	t.Logf("%d swaps (%d reloads, %d corrupt rejected, %d written slowly) in %s; %d frames in order, no gap; other events %v",
		deliverySwaps, reloads, rejects, slow, time.Since(t0).Round(time.Millisecond), len(frames), counts)
}
