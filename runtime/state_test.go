package runtime

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt/demomodel"
)

// TestLastGoodSurvivesTornModelFile: the daemon keeps a copy of the last
// model file that passed validation; after a "power cut" that left the
// configured file truncated, the next start serves the copy (engine_fallback)
// instead of refusing to start, and a good file written later replaces it.
func TestLastGoodSurvivesTornModelFile(t *testing.T) {
	backend := ortBackend(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	cfgText := func(s string) string {
		s = mustReplace(t, s, `state_dir = ""`, `state_dir = "`+state+`"`)
		s = mustReplace(t, s, "fps = 30.0", "fps = 100.0")
		return mustReplace(t, s, `path = "builtin:demo"`, `path = "`+model+`"`)
	}
	run := func(sink *recordingSink) func() {
		cfg := defaultConfig(t, cfgText)
		_, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend)})
		return func() {
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
	}
	kept := filepath.Join(state, "last-good", "demo.model")
	keptIs := func(v int) func() bool {
		want := variant(t, v)
		return func() bool { return bytes.Equal(keptContent(kept), want) }
	}

	sink := newRecordingSink()
	stop := run(sink)
	sink.waitResults(t, 5, 30*time.Second)
	waitFor(t, 30*time.Second, keptIs(0))
	writeAtomic(t, model, variant(t, 2))
	waitFor(t, 30*time.Second, func() bool { return latestGeneration(sink) == 2 })
	waitFor(t, 30*time.Second, keptIs(2))
	stop()

	// Power cut in the middle of an in-place copy of a new model.
	v5 := variant(t, 5)
	if err := os.WriteFile(model, v5[:300], 0o644); err != nil {
		t.Fatal(err)
	}
	cut := time.Now().Add(-time.Hour) // the power cut was before this start
	if err := os.Chtimes(model, cut, cut); err != nil {
		t.Fatal(err)
	}
	sink = newRecordingSink()
	stop = run(sink)
	defer stop()
	results := sink.waitResults(t, 10, 30*time.Second)
	opts := syntheticOptions(defaultConfig(t, cfgText).Source("cam0"))
	for _, r := range results {
		if want := demomodel.Expected(synthetic.TruthAt(opts, r.FrameSeq).Background, 2); r.Outputs[0].Classes[0].Index != want {
			t.Fatalf("frame %d: class %d, want %d (computed by the kept variant 2)", r.FrameSeq, r.Outputs[0].Classes[0].Index, want)
		}
	}
	if !hasStatus(sink, "engine_fallback") {
		t.Fatal("no engine_fallback status record")
	}
	// The finished file replaces the copy.
	writeAtomic(t, model, v5)
	waitFor(t, 30*time.Second, func() bool { return latestGeneration(sink) == 2 })
	waitFor(t, 30*time.Second, keptIs(5))
}

// keptContent returns the model bytes of the last-good copy at p, or nil.
func keptContent(p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	_, n, err := readHeader(bufio.NewReader(bytes.NewReader(b)), p)
	if err != nil {
		return nil
	}
	return b[n:]
}

// TestStateDiskFull is fault 17 of the reliability table: the state folder
// is full (failpoint state/write: ENOSPC from the second copy on). Reloads
// and inference go on, the failure is counted in edged_state_writes_total,
// and the copy kept before stays intact.
func TestStateDiskFull(t *testing.T) {
	backend := ortBackend(t)
	old := failpoints
	failpoints = parseFailpoints("state/write=error:2")
	// A cleanup registered before the daemon's runs after it has stopped:
	// a deferred restore would race the pipeline still reading it.
	t.Cleanup(func() { failpoints = old })
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	cfg := defaultConfig(t, func(s string) string {
		s = mustReplace(t, s, `state_dir = ""`, `state_dir = "`+state+`"`)
		s = mustReplace(t, s, "fps = 30.0", "fps = 100.0")
		return mustReplace(t, s, `path = "builtin:demo"`, `path = "`+model+`"`)
	})
	sink := newRecordingSink()
	d, _, _ := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend)})
	metric := func(result string) string {
		for _, line := range strings.Split(gatherText(t, d.d), "\n") {
			if v, ok := strings.CutPrefix(line, `edged_state_writes_total{result="`+result+`"} `); ok {
				return v
			}
		}
		return ""
	}
	kept := filepath.Join(state, "last-good", "demo.model")
	v0 := variant(t, 0)
	waitFor(t, 30*time.Second, func() bool { return bytes.Equal(keptContent(kept), v0) })
	waitFor(t, 5*time.Second, func() bool { return metric("ok") == "1" })

	// The disk is full now: the new model is served, its copy cannot be kept.
	writeAtomic(t, model, variant(t, 3))
	waitFor(t, 30*time.Second, func() bool { return latestGeneration(sink) == 2 })
	waitFor(t, 30*time.Second, func() bool { return metric("error") == "1" })
	n := len(sink.waitResults(t, 1, time.Second))
	sink.waitResults(t, n+20, 30*time.Second)
	if !bytes.Equal(keptContent(kept), v0) {
		t.Errorf("the copy kept before the disk filled changed")
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "last-good")); len(ents) != 1 {
		t.Errorf("state folder holds %d entries, want the one copy", len(ents))
	}
	if got := metric("ok"); got != "1" {
		t.Errorf(`edged_state_writes_total{result="ok"} = %q, want 1`, got)
	}
}

// TestLastGoodOnlyForItsModel: a last-good copy is served only for the
// model and the model file that wrote it, and a model name (here one that
// bypassed the configuration check) never puts a copy outside the state
// folder. Before, "./x" shared x's copy and served it as engine_fallback,
// a model moved to another file fell back to the old file's copy, and
// "../../escape" wrote its copy two folders up.
func TestLastGoodOnlyForItsModel(t *testing.T) {
	backend := ortBackend(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	good := filepath.Join(dir, "good.onnx")
	writeAtomic(t, good, variant(t, 1))
	torn := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, variant(t, 4)[:300], 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour) // torn by a power cut, before this start
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withModel := func(name, path string) *config.Config {
		cfg := defaultConfig(t, func(s string) string {
			s = mustReplace(t, s, `state_dir = ""`, `state_dir = "`+state+`"`)
			return mustReplace(t, s, `path = "builtin:demo"`, `path = "`+path+`"`)
		})
		// Names are checked by Parse; set them afterwards, as a caller
		// building a Config in code could.
		cfg.Models[0].Name, cfg.Pipelines[0].Model = name, name
		return cfg
	}
	// startFails runs cfg and wants the start to fail without falling back.
	startFails := func(what string, cfg *config.Config) {
		t.Helper()
		sink := newRecordingSink()
		d, err := New(Options{Config: cfg, Factories: testFactories(t, sink, backend)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("%s: Run returned nil, want the torn file's error", what)
				}
				return
			case <-time.After(20 * time.Millisecond):
				if hasStatus(sink, "engine_fallback") {
					cancel()
					<-done
					t.Fatalf("%s: served another model's last-good copy (engine_fallback)", what)
				}
			case <-deadline:
				t.Fatalf("%s: Run neither failed nor fell back", what)
			}
		}
	}

	// Model x keeps a copy of good.onnx.
	sink := newRecordingSink()
	_, _, stop := runDaemon(t, Options{Config: withModel("x", good), Factories: testFactories(t, sink, backend)})
	sink.waitResults(t, 3, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(filepath.Join(state, "last-good", "x.model")); return err == nil })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	startFails(`model "./x" (same file name as x's copy)`, withModel("./x", torn("a.onnx")))
	startFails(`model x moved to another file`, withModel("x", torn("b.onnx")))

	// Copy the x copy under another model's name (two names that meet in
	// one file, e.g. on a case-insensitive file system): not served to it.
	b, err := os.ReadFile(filepath.Join(state, "last-good", "x.model"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "last-good", "y.model"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	startFails(`model y with x's copy under its name`, withModel("y", torn("c.onnx")))

	// A name that climbs out of the state folder: serving works, the copy
	// is refused and counted as a failed state write.
	sink = newRecordingSink()
	d, _, _ := runDaemon(t, Options{Config: withModel("../../escape", good), Factories: testFactories(t, sink, backend)})
	sink.waitResults(t, 3, 30*time.Second)
	var lg *lastGood // published after the pipelines start (TestSharedModelLastGood)
	waitFor(t, 30*time.Second, func() bool { lg = d.d.currentGraph().lastGood; return lg != nil })
	waitFor(t, 30*time.Second, func() bool { return lg.writes.Load()+lg.writeErrors.Load() > 0 })
	if lg.writes.Load() != 0 || lg.writeErrors.Load() != 1 {
		t.Errorf("state writes ok %d error %d, want 0 and 1", lg.writes.Load(), lg.writeErrors.Load())
	}
	for _, p := range []string{filepath.Join(dir, "escape.model"), filepath.Join(state, "escape.model")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a model name wrote %s, outside %s", p, filepath.Join(state, "last-good"))
		}
	}
}

// TestLastGoodCopyChecks: a copy is served only when its header names the
// model and file and its content has the recorded hash; a raw copy (no
// header: it cannot say which model it holds) is not served.
func TestLastGoodCopyChecks(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	content := []byte("model bytes")
	if err := os.WriteFile(model, content, 0o644); err != nil {
		t.Fatal(err)
	}
	l := newLastGood(filepath.Join(dir, "state"), nil, 0)
	sum := sha256.Sum256(content)
	if wrote, err := l.save(context.Background(), saveJob{model: "m", path: model, sha: sum}); !wrote || err != nil {
		t.Fatalf("save: wrote %v, %v", wrote, err)
	}
	if wrote, err := l.save(context.Background(), saveJob{model: "m", path: model, sha: sum}); wrote || err != nil {
		t.Fatalf("second save of the same content: wrote %v, %v; want nothing to do", wrote, err)
	}
	if data, got, err := l.load("m", model); err != nil || !bytes.Equal(data, content) || got != sum {
		t.Fatalf("load: %q %v", data, err)
	}
	kept := l.file("m")
	good, _ := os.ReadFile(kept)
	for _, c := range []struct {
		name string
		copy []byte
	}{
		{"raw copy without a header", content},
		{"content changed", append(bytes.Clone(good[:len(good)-1]), 'X')},
		{"truncated", good[:len(good)-2]},
		{"longer", append(bytes.Clone(good), 'X')},
		{"empty", nil},
	} {
		if err := os.WriteFile(kept, c.copy, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.load("m", model); err == nil {
			t.Errorf("%s: served", c.name)
		}
	}
	// A header declaring a size the file does not hold is refused before
	// that size is allocated.
	big := bytes.Replace(good, []byte(fmt.Sprintf(`"size":%d`, len(content))), []byte(`"size":900000000`), 1)
	if bytes.Equal(big, good) {
		t.Fatalf("no size in the header: %q", good)
	}
	os.WriteFile(kept, big, 0o600)
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	_, _, err := l.load("m", model)
	goruntime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "header records 900000000 bytes, but the file holds") {
		t.Errorf("a header declaring 900 MB: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("loading it allocated %d MiB", grew>>20)
	}
	if _, _, err := l.load("m", filepath.Join(dir, "other.onnx")); err == nil {
		t.Error("a copy served for another file")
	}
	if _, err := l.save(context.Background(), saveJob{model: "a/../m", path: model, sha: sum}); err == nil {
		t.Error(`model "a/../m" got a copy`)
	}
}
