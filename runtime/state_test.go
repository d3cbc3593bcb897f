package runtime

import (
	"bytes"
	"context"
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
		s = strings.Replace(s, `state_dir = ""`, `state_dir = "`+state+`"`, 1)
		s = strings.Replace(s, "fps = 30.0", "fps = 100.0", 1)
		return strings.Replace(s, `path = "builtin:demo"`, `path = "`+model+`"`, 1)
	}
	run := func(sink *recordingSink) func() {
		cfg := defaultConfig(t, cfgText)
		d, err := New(Options{Config: cfg, Factories: testFactories(t, sink, backend)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
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
