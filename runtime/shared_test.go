package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
)

// countingBackend counts the models a backend loads and can make the
// engines it loads refuse to share (fault injection at the engine
// contract: a context or binding that cannot be made for one pipeline).
type countingBackend struct {
	trt.Backend
	loads     atomic.Int64
	shares    atomic.Int64
	failShare atomic.Bool
	mu        sync.Mutex
	weights   map[any]bool // every model loaded
}

func (b *countingBackend) Load(ctx context.Context, model []byte, o trt.LoadOptions) (trt.Engine, error) {
	e, err := b.Backend.Load(ctx, model, o)
	if err != nil {
		return nil, err
	}
	b.loads.Add(1)
	if s, ok := e.(trt.Sharer); ok {
		b.mu.Lock()
		b.weights[s.Weights()] = true
		b.mu.Unlock()
	}
	return &faultEngine{Engine: e, b: b}, nil
}

type faultEngine struct {
	trt.Engine
	b *countingBackend
}

func (e *faultEngine) Share(ctx context.Context, o trt.LoadOptions) (trt.Engine, error) {
	if e.b.failShare.Load() {
		return nil, errors.New("injected: no execution context for this pipeline")
	}
	n, err := e.Engine.(trt.Sharer).Share(ctx, o)
	if err != nil {
		return nil, err
	}
	e.b.shares.Add(1)
	return &faultEngine{Engine: n, b: e.b}, nil
}

func (e *faultEngine) Weights() any            { return e.Engine.(trt.Sharer).Weights() }
func (e *faultEngine) Metadata() *trt.Metadata { return trt.MetadataOf(e.Engine) }

// sharedConfig is the default configuration with n pipelines p0..p(n-1)
// on cameras cam0.. of 160x120 at fps, all naming model demo at path.
func sharedConfig(t *testing.T, n int, fps float64, path string) string {
	t.Helper()
	text := defaultConfigText(t, func(s string) string {
		s = mustReplace(t, s, "fps = 30.0", fmt.Sprintf("fps = %.1f", fps))
		s = mustReplace(t, s, "width = 640 ", "width = 160 ")
		s = mustReplace(t, s, "height = 480", "height = 120")
		s = mustReplace(t, s, `schedule = "latest"`, `schedule = "queue"`)
		return mustReplace(t, s, `path = "builtin:demo"`, `path = "`+path+`"`)
	})
	var b strings.Builder
	b.WriteString(text)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `
[[source]]
name = "cam%[1]d"
kind = "synthetic"
width = 160
height = 120
format = "YUYV"
fps = %.1[2]f
seed = %[1]d
period = 30

[[pipeline]]
name = "p%[1]d"
source = "cam%[1]d"
model = "demo"
sinks = ["local"]
schedule = "queue"

[[pipeline.postprocess]]
output = "class"
kind = "topk"
k = 1

[[pipeline.postprocess]]
output = "centroid"
kind = "raw"
`, i, fps)
	}
	return b.String()
}

// TestSharedEngineReload: four pipelines on one model file share one
// engine (one model loaded per change, an engine per pipeline shared from
// it), and 50 hot reloads swap it for all of them between two inferences:
// every pipeline sees every frame (no frame_seq gap), each swap is one new
// generation, the same in all four, every result computed by the variant
// its generation names, and neither a broken file nor a swap whose sharing
// fails for one pipeline is ever served by any of them.
func TestSharedEngineReload(t *testing.T) {
	if testing.Short() {
		t.Skip("50 reloads under four pipelines take most of a minute")
	}
	const pipes, reloads = 4, 50
	backend := &countingBackend{Backend: ortBackend(t), weights: map[any]bool{}}
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	cfg := parseConfig(t, sharedConfig(t, pipes, 60, model))
	sink := newRecordingSink()
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend)})
	allAt := func(gen uint64) bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		seen := map[string]uint64{}
		for _, r := range sink.results {
			seen[r.Pipeline] = r.Engine.Generation
		}
		if len(seen) < pipes {
			return false
		}
		for _, g := range seen {
			if g != gen {
				return false
			}
		}
		return true
	}
	waitFor(t, 60*time.Second, func() bool { return allAt(1) })
	if n, s := backend.loads.Load(), backend.shares.Load(); n != 1 || s != pipes-1 {
		t.Fatalf("at start: %d models loaded and %d engines shared, want 1 and %d", n, s, pipes-1)
	}
	nan, err := demomodel.Build(demomodel.Options{NaN: true})
	if err != nil {
		t.Fatal(err)
	}
	rejected, separate := 0, 0
	for k := 1; k <= reloads; k++ {
		switch k % 10 {
		case 3: // a broken file: rejected for all, the serving engine stays
			writeAtomic(t, model, nan)
			rejected++
			waitRejected(t, sink, rejected*pipes)
		case 7: // sharing fails for the pipelines after the first (TensorRT 8.5: one context per profile): each loads an engine of its own, and the swap still happens for all at one generation
			backend.failShare.Store(true)
			separate++
		}
		writeAtomic(t, model, variant(t, k%8))
		deadline := time.Now().Add(30 * time.Second)
		for !allAt(uint64(k + 1)) {
			if time.Now().After(deadline) {
				sink.mu.Lock()
				for _, r := range sink.status {
					t.Logf("%s %s gen %d: %s", r.Event, r.Pipeline, r.Engine.Generation, r.Reason)
				}
				sink.mu.Unlock()
				t.Fatalf("reload %d: not every pipeline at generation %d", k, k+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		backend.failShare.Store(false)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// One load per change: the start, every swap, and each rejected file
	// (it fails its warm-up) loaded once for all four pipelines; where
	// sharing failed, the three other pipelines loaded their own.
	if got, want := backend.loads.Load(), int64(1+reloads+rejected+separate*(pipes-1)); got != want {
		t.Errorf("%d models loaded, want %d (one per change, not one per pipeline, but for the %d swaps whose sharing failed)", got, want, separate)
	}
	if got, want := backend.shares.Load(), int64((1+reloads-separate)*(pipes-1)); got != want {
		t.Errorf("%d engines shared, want %d (three per installed generation whose sharing worked)", got, want)
	}
	opts := map[string]synthetic.Options{}
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		opts[pc.Name] = syntheticOptions(cfg.Source(pc.Source))
	}
	last := map[string]stream.Record{}
	gens := map[uint64]map[string]bool{}
	for _, r := range sink.results {
		if p, ok := last[r.Pipeline]; ok {
			if r.FrameSeq != p.FrameSeq+1 {
				t.Fatalf("pipeline %s: frame %d followed by %d: frames were lost", r.Pipeline, p.FrameSeq, r.FrameSeq)
			}
			if r.Engine.Generation < p.Engine.Generation {
				t.Fatalf("pipeline %s: generation went back from %d to %d", r.Pipeline, p.Engine.Generation, r.Engine.Generation)
			}
		}
		last[r.Pipeline] = r
		g := r.Engine.Generation
		if gens[g] == nil {
			gens[g] = map[string]bool{}
		}
		gens[g][r.Pipeline] = true
		v := int(g-1) % 8
		want := demomodel.Expected(synthetic.TruthAt(opts[r.Pipeline], r.FrameSeq).Background, v)
		if got := r.Outputs[0].Classes[0].Index; got != want {
			t.Fatalf("pipeline %s frame %d, generation %d (variant %d): class %d, want %d", r.Pipeline, r.FrameSeq, g, v, got, want)
		}
	}
	for g := uint64(1); g <= reloads+1; g++ {
		if len(gens[g]) != pipes {
			t.Errorf("generation %d served by %d pipelines, want all %d", g, len(gens[g]), pipes)
		}
	}
	if len(gens) != reloads+1 {
		t.Errorf("%d generations served, want %d", len(gens), reloads+1)
	}
	sink.mu.Lock()
	reloadedBy := map[string]int{}
	for _, s := range sink.status {
		switch s.Event {
		case "engine_reloaded":
			reloadedBy[s.Pipeline]++
		case "engine_rejected":
			if !strings.HasPrefix(s.Reason, "warmup: ") && !strings.HasPrefix(s.Reason, "invalid: ") {
				t.Errorf("rejection reason %q", s.Reason)
			}
		}
	}
	sink.mu.Unlock()
	for i := range pipes {
		name := cfg.Pipelines[i].Name
		if reloadedBy[name] != reloads {
			t.Errorf("pipeline %s: %d engine_reloaded events, want %d", name, reloadedBy[name], reloads)
		}
	}
	t.Logf("%d results from %d pipelines over %d reloads (%d rejected), one model loaded per change, no frame lost",
		len(sink.results), pipes, reloads, rejected)
}

func countStatus(s *recordingSink, event string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.status {
		if r.Event == event {
			n++
		}
	}
	return n
}

// waitRejected waits until the sink has seen want engine_rejected
// records, and fails, listing every status record, on more or on none.
func waitRejected(t *testing.T, s *recordingSink, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := countStatus(s, "engine_rejected")
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			s.mu.Lock()
			for _, r := range s.status {
				t.Logf("%s %s gen %d: %s", r.Event, r.Pipeline, r.Engine.Generation, r.Reason)
			}
			s.mu.Unlock()
			t.Fatalf("%d engine_rejected records, want %d", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPipelineAddedSharesRunningModel: a pipeline a configuration reload
// adds to a model that serves shares the engine in memory (the file is not
// loaded again) and counts its generation from the first result on; the
// pipelines that were running keep running, their frames uninterrupted.
func TestPipelineAddedSharesRunningModel(t *testing.T) {
	backend := &countingBackend{Backend: ortBackend(t), weights: map[any]bool{}}
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	sink := newRecordingSink()
	d, _, stop := runDaemon(t, Options{Config: parseConfig(t, sharedConfig(t, 2, 60, model)), Factories: testFactories(t, sink, backend)})
	latest := func(pipe string) (stream.Record, bool) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for i := len(sink.results) - 1; i >= 0; i-- {
			if r := sink.results[i]; r.Pipeline == pipe {
				return r, true
			}
		}
		return stream.Record{}, false
	}
	atGen := func(pipe string, g uint64) func() bool {
		return func() bool { r, ok := latest(pipe); return ok && r.Engine.Generation == g }
	}
	waitFor(t, 60*time.Second, atGen("p1", 1))
	writeAtomic(t, model, variant(t, 3)) // generation 2 for both
	waitFor(t, 30*time.Second, atGen("demo", 2))
	waitFor(t, 30*time.Second, atGen("p1", 2))
	before, _ := latest("p1")
	if err := d.Reload(context.Background(), parseConfig(t, sharedConfig(t, 3, 60, model))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { _, ok := latest("p2"); return ok })
	sink.mu.Lock()
	var first stream.Record
	for _, r := range sink.results {
		if r.Pipeline == "p2" {
			first = r
			break
		}
	}
	var seq uint64
	for _, r := range sink.results {
		if r.Pipeline == "p1" && r.FrameSeq > before.FrameSeq {
			if seq != 0 && r.FrameSeq != seq+1 {
				t.Errorf("p1: frame %d followed by %d across the reload", seq, r.FrameSeq)
			}
			seq = r.FrameSeq
		}
	}
	sink.mu.Unlock()
	if first.Engine.Generation != 2 || first.Engine.SHA256 != before.Engine.SHA256 {
		t.Errorf("the added pipeline's first result: generation %d %s, want the running model's 2 %s", first.Engine.Generation, first.Engine.SHA256, before.Engine.SHA256)
	}
	if n := backend.loads.Load(); n != 2 {
		t.Errorf("%d models loaded, want 2 (the start and the swap; the added pipeline shares)", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedModelLastGood: the last-good copy of a model shared by four
// pipelines is written once per swap (not once per pipeline), and when the
// file is unusable at the next start the copy is loaded once and serves
// all four (an engine_fallback for each, one generation).
func TestSharedModelLastGood(t *testing.T) {
	backend := &countingBackend{Backend: ortBackend(t), weights: map[any]bool{}}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	text := strings.Replace(sharedConfig(t, 4, 30, model), `state_dir = ""`, `state_dir = "`+state+`"`, 1)
	sink := newRecordingSink()
	d, _, stop := runDaemon(t, Options{Config: parseConfig(t, text), Factories: testFactories(t, sink, backend)})
	sink.waitResults(t, 4, 30*time.Second)
	// The pipelines start before the daemon publishes their graph (commit
	// starts them, then setGraph), so results can come while
	// currentGraph is still the empty one it started from.
	var lg *lastGood
	waitFor(t, 30*time.Second, func() bool { lg = d.d.currentGraph().lastGood; return lg != nil })
	waitFor(t, 30*time.Second, func() bool { return lg.writes.Load() == 1 })
	writeAtomic(t, model, variant(t, 2))
	waitFor(t, 30*time.Second, func() bool { return countStatus(sink, "engine_reloaded") == 4 })
	waitFor(t, 30*time.Second, func() bool { return lg.writes.Load() >= 2 })
	time.Sleep(500 * time.Millisecond)
	if n := lg.writes.Load(); n != 2 {
		t.Errorf("%d last-good copies written for the start and one swap under four pipelines, want 2", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A torn file at the next start: the copy (variant 2) serves all four.
	good := variant(t, 2)
	if err := os.WriteFile(model, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // not a file still being written
	if err := os.Chtimes(model, old, old); err != nil {
		t.Fatal(err)
	}
	loads := backend.loads.Load()
	sink = newRecordingSink()
	_, _, stop = runDaemon(t, Options{Config: parseConfig(t, text), Factories: testFactories(t, sink, backend)})
	waitFor(t, 30*time.Second, func() bool { return countStatus(sink, "engine_fallback") == 4 })
	rs := sink.waitResults(t, 8, 30*time.Second)
	if n := backend.loads.Load() - loads; n != 1 {
		t.Errorf("the last-good copy was loaded %d times for four pipelines, want once", n)
	}
	for _, r := range rs {
		if r.Engine.Generation != 1 {
			t.Errorf("pipeline %s serves generation %d from the copy, want 1", r.Pipeline, r.Engine.Generation)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestShareEngineLoadsItsOwnWhenSharingFails: edged check's ShareEngine
// judges what the daemon does. Where the engine cannot be shared for a
// pipeline, the daemon loads it one of its own from the bytes it holds;
// ShareEngine reads the model again and does the same (it failed the
// model before). A file that changed since the engine was loaded is not
// loaded in its place.
func TestShareEngineLoadsItsOwnWhenSharingFails(t *testing.T) {
	ctx := context.Background()
	backend := &countingBackend{Backend: ortBackend(t), weights: map[any]bool{}}
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, variant(t, 0))
	cfg := parseConfig(t, sharedConfig(t, 2, 30, model))
	mc := &cfg.Models[0]
	base, err := LoadEngine(ctx, cfg, mc, &cfg.Pipelines[0], backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	backend.failShare.Store(true)
	hot, err := ShareEngine(ctx, cfg, base, mc, &cfg.Pipelines[1], backend, nil)
	if err != nil {
		t.Fatalf("sharing fails, the model's bytes can be read: %v, want an engine of its own", err)
	}
	hot.Close()
	if n := backend.loads.Load(); n != 2 {
		t.Errorf("%d models loaded, want 2 (the first pipeline's and the second's own)", n)
	}
	writeAtomic(t, model, variant(t, 1))
	if hot, err := ShareEngine(ctx, cfg, base, mc, &cfg.Pipelines[1], backend, nil); err == nil || !strings.Contains(err.Error(), "changed since it was loaded") {
		if hot != nil {
			hot.Close()
		}
		t.Errorf("the file changed since: %v, want it refused", err)
	}
}
