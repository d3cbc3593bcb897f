package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		return func() bool { b, err := os.ReadFile(kept); return err == nil && bytes.Equal(b, want) }
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

// TestStateDiskFull is fault 17 of the reliability table: the state folder
// is full (failpoint state/write: ENOSPC from the second copy on). Reloads
// and inference go on, the failure is counted in edged_state_writes_total,
// and the copy kept before stays intact.
func TestStateDiskFull(t *testing.T) {
	backend := ortBackend(t)
	old := failpoints
	failpoints = parseFailpoints("state/write=error:2")
	defer func() { failpoints = old }()
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
		var b strings.Builder
		d.d.writeMetrics(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, `edged_state_writes_total{result="`+result+`"} `); ok {
				return v
			}
		}
		return ""
	}
	kept := filepath.Join(state, "last-good", "demo.model")
	v0 := variant(t, 0)
	waitFor(t, 30*time.Second, func() bool { b, err := os.ReadFile(kept); return err == nil && bytes.Equal(b, v0) })
	waitFor(t, 5*time.Second, func() bool { return metric("ok") == "1" })

	// The disk is full now: the new model is served, its copy cannot be kept.
	writeAtomic(t, model, variant(t, 3))
	waitFor(t, 30*time.Second, func() bool { return latestGeneration(sink) == 2 })
	waitFor(t, 30*time.Second, func() bool { return metric("error") == "1" })
	n := len(sink.waitResults(t, 1, time.Second))
	sink.waitResults(t, n+20, 30*time.Second)
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, v0) {
		t.Errorf("the copy kept before the disk filled changed (%v)", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "last-good")); len(ents) != 1 {
		t.Errorf("state folder holds %d entries, want the one copy", len(ents))
	}
	if got := metric("ok"); got != "1" {
		t.Errorf(`edged_state_writes_total{result="ok"} = %q, want 1`, got)
	}
}
