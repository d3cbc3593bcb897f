package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt/demomodel"
)

// writeAtomic writes data to a temporary name in the same folder and
// renames it over path, as the documented writer protocol says.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func variant(t *testing.T, n int) []byte {
	t.Helper()
	b, err := demomodel.Variant(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHotReloadUnderLoad swaps demo model variants by rename-into-place
// while a 200 fps synthetic camera runs, and checks that no frame is lost,
// generations never go back, and every result was computed by the model
// its generation names.
func TestHotReloadUnderLoad(t *testing.T) {
	backend := ortBackend(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	sink := newRecordingSink()
	cfg := defaultConfig(t, func(s string) string {
		s = strings.Replace(s, "fps = 30.0", "fps = 200.0", 1)
		s = strings.Replace(s, `schedule = "latest"`, `schedule = "queue"`, 1)
		return strings.Replace(s, `path = "builtin:demo"`, `path = "`+model+`"`, 1)
	})
	d, err := New(Options{Config: cfg, Factories: testFactories(t, sink, backend)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	sink.waitResults(t, 20, 30*time.Second)

	const reloads = 12
	for k := 1; k <= reloads; k++ {
		writeAtomic(t, model, variant(t, k%8))
		waitFor(t, 30*time.Second, func() bool { return latestGeneration(sink) == uint64(k+1) })
		if k == 6 {
			// A broken file is rejected and the serving engine stays.
			writeAtomic(t, model, []byte("not a model"))
			waitFor(t, 30*time.Second, func() bool { return hasStatus(sink, "engine_rejected") })
			writeAtomic(t, model, variant(t, k%8)) // back to the serving content: unchanged
		}
	}
	n := len(sink.waitResults(t, 1, time.Second))
	sink.waitResults(t, n+20, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	opts := syntheticOptions(cfg.Source("cam0"))
	results := sink.results
	var lastSeq, lastGen uint64
	for i, r := range results {
		if i > 0 && r.FrameSeq != lastSeq+1 {
			t.Fatalf("frame %d followed by %d: frames were lost", lastSeq, r.FrameSeq)
		}
		if r.Engine.Generation < lastGen {
			t.Fatalf("generation went back from %d to %d", lastGen, r.Engine.Generation)
		}
		lastSeq, lastGen = r.FrameSeq, r.Engine.Generation
		v := int(r.Engine.Generation-1) % 8
		want := demomodel.Expected(synthetic.TruthAt(opts, r.FrameSeq).Background, v)
		if got := r.Outputs[0].Classes[0].Index; got != want {
			t.Fatalf("frame %d, generation %d (variant %d): class %d, want %d", r.FrameSeq, r.Engine.Generation, v, got, want)
		}
	}
	if lastGen != reloads+1 {
		t.Fatalf("ended on generation %d, want %d", lastGen, reloads+1)
	}
	reloaded := 0
	for _, s := range sink.status {
		if s.Event == "engine_reloaded" {
			reloaded++
			if s.Engine.Name != "demo" || s.Engine.Generation < 2 || len(s.Engine.SHA256) != 12 {
				t.Errorf("status %+v", s)
			}
		}
		if s.Event == "engine_rejected" && !strings.HasPrefix(s.Reason, "invalid: ") {
			t.Errorf("rejection reason %q", s.Reason)
		}
	}
	if reloaded != reloads {
		t.Errorf("%d engine_reloaded events, want %d", reloaded, reloads)
	}
	t.Logf("%d results over %d reloads, no frame lost", len(results), reloads)
}

func latestGeneration(s *recordingSink) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return 0
	}
	return s.results[len(s.results)-1].Engine.Generation
}

func hasStatus(s *recordingSink, event string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.status {
		if r.Event == event {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
