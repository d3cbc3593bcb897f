package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt/demomodel"
)

// resultsOf returns the results of one pipeline received so far.
func resultsOf(s *recordingSink, pipeline string) []stream.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stream.Record
	for _, r := range s.results {
		if r.Pipeline == pipeline {
			out = append(out, r)
		}
	}
	return out
}

// waitNewResults waits until pipeline has n more results than it had.
func waitNewResults(t *testing.T, s *recordingSink, pipeline string, had, n int) []stream.Record {
	t.Helper()
	waitFor(t, 30*time.Second, func() bool { return len(resultsOf(s, pipeline)) >= had+n })
	return resultsOf(s, pipeline)[had:]
}

// twoPipelines is the default configuration with a second pipeline,
// "side", on its own synthetic camera (every frame, in order), both on
// the model file at model.
func twoPipelines(t *testing.T, model string, edit func(string) string) *config.Config {
	return defaultConfig(t, func(s string) string {
		s = mustReplace(t, s, "fps = 30.0", "fps = 100.0")
		s = mustReplace(t, s, `path = "builtin:demo"`, `path = "`+model+`"`)
		s = mustReplace(t, s, "[[model]]", `[[source]]
name = "cam1"
kind = "synthetic"
width = 160
height = 120
fps = 100.0
seed = 5

[[model]]`)
		s = mustReplace(t, s, "[[sink]]", `[[pipeline]]
name = "side"
source = "cam1"
model = "demo"
sinks = ["local"]
schedule = "queue"

[[sink]]`)
		if edit != nil {
			s = edit(s)
		}
		return s
	})
}

// TestConfigReloadIsADiffingTransaction: configuration reloads change only
// what they must. A changed rate restarts that pipeline's source and keeps
// its engine (generation 1, same SHA-256) while the other pipeline runs
// untouched (every frame, in order, across the reload). A model entry
// pointing at another file with the same content keeps every engine and
// every pipeline. A model file torn in place does not matter to a reload
// that keeps the model entry; a reload that needs the file (threads
// changed) is refused and the running graph keeps serving, untouched.
// Another file with other content is loaded in the transaction and the
// pipelines using it restart on it.
func TestConfigReloadIsADiffingTransaction(t *testing.T) {
	backend := ortBackend(t)
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx"), filepath.Join(dir, "c.onnx")
	writeAtomic(t, a, variant(t, 0))
	writeAtomic(t, b, variant(t, 0))
	writeAtomic(t, c, variant(t, 3))
	sink := newRecordingSink()
	notes := &fakeNotifier{}
	cfg := twoPipelines(t, a, nil)
	dd, ctx, _ := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend), Notifier: notes})
	first := sink.waitResults(t, 1, 30*time.Second)[0]
	sha := first.Engine.SHA256
	waitNewResults(t, sink, "side", 0, 20)

	// consecutive checks that side's frames went on, one after the other,
	// on its first engine, and returns how many side results there are.
	consecutive := func(step string) int {
		t.Helper()
		rs := resultsOf(sink, "side")
		for i, r := range rs {
			if i > 0 && r.FrameSeq != rs[i-1].FrameSeq+1 {
				t.Fatalf("%s: side's frame %d followed by %d: the unchanged pipeline was restarted or lost frames", step, rs[i-1].FrameSeq, r.FrameSeq)
			}
			if r.Engine.Generation != 1 || r.Engine.SHA256 != sha {
				t.Fatalf("%s: side's frame %d on engine %+v, want generation 1 %s", step, r.FrameSeq, r.Engine, sha)
			}
		}
		return len(rs)
	}
	reload := func(step string, next *config.Config) {
		t.Helper()
		if err := dd.Reload(ctx, next); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	// 1. Only cam0's rate changes.
	sideHad := consecutive("before")
	demo := resultsOf(sink, "demo")
	lastDemo := demo[len(demo)-1].FrameSeq
	reload("rate", twoPipelines(t, a, func(s string) string { return mustReplace(t, s, "fps = 100.0", "fps = 90.0") }))
	demoHad := len(resultsOf(sink, "demo")) // the old camera has stopped
	rs := waitNewResults(t, sink, "demo", demoHad, 20)
	if rs[0].FrameSeq >= lastDemo {
		t.Errorf("rate: demo's frame_seq went on from %d to %d: its camera was not restarted with the new rate", lastDemo, rs[0].FrameSeq)
	}
	for _, r := range rs {
		if r.Engine.Generation != 1 || r.Engine.SHA256 != sha {
			t.Fatalf("rate: demo's frame %d on engine %+v: the engine in memory should have carried over (generation 1, %s)", r.FrameSeq, r.Engine, sha)
		}
	}
	waitNewResults(t, sink, "side", sideHad, 20)
	consecutive("rate")

	// 2. The model entry names another file with the same content.
	demoHad = len(resultsOf(sink, "demo"))
	lastDemo = resultsOf(sink, "demo")[demoHad-1].FrameSeq
	withB := twoPipelines(t, b, func(s string) string { return mustReplace(t, s, "fps = 100.0", "fps = 90.0") })
	reload("same content", withB)
	rs = waitNewResults(t, sink, "demo", demoHad, 20)
	if rs[0].FrameSeq <= lastDemo {
		t.Errorf("same content: demo restarted (frame %d after %d)", rs[0].FrameSeq, lastDemo)
	}
	consecutive("same content")

	// 3. The file is torn in place: the watcher rejects it, the engine in
	// memory serves. A reload that keeps the model entry does not care.
	if err := os.WriteFile(b, variant(t, 0)[:300], 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return hasStatus(sink, "engine_rejected") })
	demoHad = len(resultsOf(sink, "demo"))
	reload("torn, rate", twoPipelines(t, b, func(s string) string { return mustReplace(t, s, "fps = 100.0", "fps = 80.0") }))
	for _, r := range waitNewResults(t, sink, "demo", demoHad, 20) {
		if r.Engine.Generation != 1 || r.Engine.SHA256 != sha {
			t.Fatalf("torn, rate: demo's frame %d on engine %+v", r.FrameSeq, r.Engine)
		}
	}
	consecutive("torn, rate")

	// 4. A change that needs the torn file is refused before anything
	// stops: both pipelines go on untouched.
	demoHad, sideHad = len(resultsOf(sink, "demo")), len(resultsOf(sink, "side"))
	lastDemo = resultsOf(sink, "demo")[demoHad-1].FrameSeq
	threads := twoPipelines(t, b, func(s string) string { return mustReplace(t, s, "threads = 0 ", "threads = 2 ") })
	if err := dd.Reload(ctx, threads); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("threads with a torn file: Reload returned %v, want the load error", err)
	}
	rs = waitNewResults(t, sink, "demo", demoHad, 20)
	if rs[0].FrameSeq <= lastDemo {
		t.Errorf("refused reload: demo restarted (frame %d after %d)", rs[0].FrameSeq, lastDemo)
	}
	waitNewResults(t, sink, "side", sideHad, 20)
	consecutive("refused")
	if !hasStatus(sink, "config_rejected") {
		t.Error("no config_rejected status")
	}
	// Engine requests still reach a graph.
	dd.ReloadEngines()

	// 5. Another file, other content: loaded in the transaction, and the
	// pipelines on it restart on the new engine.
	reload("other content", twoPipelines(t, c, nil))
	demoHad, sideHad = len(resultsOf(sink, "demo")), len(resultsOf(sink, "side"))
	opts := syntheticOptions(cfg.Source("cam0"))
	for _, r := range waitNewResults(t, sink, "demo", demoHad, 20) {
		if want := demomodel.Expected(synthetic.TruthAt(opts, r.FrameSeq).Background, 3); r.Outputs[0].Classes[0].Index != want || r.Engine.SHA256 == sha {
			t.Fatalf("other content: frame %d class %d engine %+v, want class %d from variant 3", r.FrameSeq, r.Outputs[0].Classes[0].Index, r.Engine, want)
		}
	}
	waitNewResults(t, sink, "side", sideHad, 5)
	if n := count(notes.all(), "RELOADING=1"); n != 5 {
		t.Errorf("%d RELOADING=1, want 5", n)
	}
}
