package runtime

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
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
		s = mustReplace(t, s, "fps = 30.0", "fps = 200.0")
		s = mustReplace(t, s, `schedule = "latest"`, `schedule = "queue"`)
		return mustReplace(t, s, `path = "builtin:demo"`, `path = "`+model+`"`)
	})
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend)})
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
	if err := stop(); err != nil {
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

// socketSinkFactory builds real socket sinks (the production sink).
func socketSinkFactory(t testing.TB) func(*config.Sink, *config.Config, net.Listener, ControlFunc) (Sink, error) {
	return func(s *config.Sink, c *config.Config, _ net.Listener, _ ControlFunc) (Sink, error) {
		return socketsink.New(socketsink.Options{Name: s.Name, Path: s.Path, NoActivation: true, QueueLen: s.ClientQueue})
	}
}

// TestFiftyReloadsAtClient is the acceptance test of issue 4 at the wire:
// a 200 fps camera, 50 reloads by rename-into-place, and a client reading
// the socket sees no seq gap, no lost frame, generations that never go
// back, and classes computed by the variant each generation names.
func TestFiftyReloadsAtClient(t *testing.T) {
	if testing.Short() {
		t.Skip("50 reloads take about half a minute")
	}
	backend := ortBackend(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	sock := filepath.Join(dir, "edged.sock")
	writeAtomic(t, model, variant(t, 0))
	cfg := defaultConfig(t, func(s string) string {
		s = mustReplace(t, s, "fps = 30.0", "fps = 200.0")
		s = mustReplace(t, s, `schedule = "latest"`, `schedule = "queue"`)
		s = mustReplace(t, s, `path = ""                 #`, `path = "`+sock+`" #`)
		return mustReplace(t, s, `path = "builtin:demo"`, `path = "`+model+`"`)
	})
	f := testFactories(t, nil, backend)
	f.Sink = socketSinkFactory(t)
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: f})
	var c *stream.Client
	var err error
	waitFor(t, 30*time.Second, func() bool {
		c, err = stream.Dial(context.Background(), sock, nil)
		return err == nil
	})
	defer c.Close()

	type seen struct {
		frame, gen uint64
		class      int
	}
	var (
		mu      sync.Mutex
		results []seen
		lastGen atomic.Uint64
		readErr = make(chan error, 1)
	)
	go func() {
		var m stream.Message
		for {
			if err := c.Next(&m); err != nil {
				readErr <- err
				return
			}
			if m.Missed != 0 {
				readErr <- fmt.Errorf("seq gap: %d records missed before seq %d", m.Missed, m.Rec.Seq)
				return
			}
			if m.Rec.Type != "result" {
				continue
			}
			mu.Lock()
			results = append(results, seen{m.Rec.FrameSeq, m.Rec.Engine.Generation, m.Rec.Outputs["class"].Top[0].Index})
			mu.Unlock()
			lastGen.Store(m.Rec.Engine.Generation)
		}
	}()
	// The socket exists before the engine is loaded: change the file only
	// once the first engine serves, or the first change may be what loads.
	waitFor(t, 30*time.Second, func() bool { return lastGen.Load() == 1 })
	const reloads = 50
	for k := 1; k <= reloads; k++ {
		writeAtomic(t, model, variant(t, k%8))
		deadline := time.Now().Add(30 * time.Second)
		for lastGen.Load() != uint64(k+1) {
			select {
			case err := <-readErr:
				t.Fatal(err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("reload %d not seen by the client", k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client did not see the stream end")
	}
	opts := syntheticOptions(cfg.Source("cam0"))
	mu.Lock()
	defer mu.Unlock()
	for i, r := range results {
		if i > 0 && (r.frame != results[i-1].frame+1 || r.gen < results[i-1].gen) {
			t.Fatalf("result %d: frame %d gen %d after frame %d gen %d", i, r.frame, r.gen, results[i-1].frame, results[i-1].gen)
		}
		want := demomodel.Expected(synthetic.TruthAt(opts, r.frame).Background, int(r.gen-1)%8)
		if r.class != want {
			t.Fatalf("frame %d, generation %d: class %d, want %d", r.frame, r.gen, r.class, want)
		}
	}
	t.Logf("%d results, %d reloads, no seq gap, no lost frame", len(results), reloads)
}

// BenchmarkReloadLatency measures end-to-end latency (capture to result)
// at 200 fps while the model is hot-reloaded once per iteration, and
// reports p99 inside reload windows (from the file write until 100 ms after
// the new generation's first result) against p99 outside them, measured in
// the same run. Run with -benchtime 20x.
func BenchmarkReloadLatency(b *testing.B) {
	backend, err := newORTForTest()
	if err != nil {
		b.Skip(err)
	}
	dir := b.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	v0, _ := demomodel.Variant(0)
	os.WriteFile(model, v0, 0o644)
	sink := newRecordingSink()
	text := strings.Replace(string(configs.Default), "fps = 30.0", "fps = 200.0", 1)
	text = strings.Replace(text, `path = "builtin:demo"`, `path = "`+model+`"`, 1)
	cfg, err := config.Parse("", []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	d, _ := New(Options{Config: cfg, Factories: testFactories(nil, sink, backend)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitResultsB(b, sink, 200)
	type window struct{ from, to int64 }
	var windows []window
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, _ := demomodel.Variant((i + 1) % 8)
		from := monoNow()
		os.WriteFile(model+".tmp", data, 0o644)
		os.Rename(model+".tmp", model)
		for latestGeneration(sink) != uint64(i+2) {
			time.Sleep(time.Millisecond)
		}
		windows = append(windows, window{from, monoNow() + int64(100*time.Millisecond)})
		time.Sleep(400 * time.Millisecond) // steady state between reloads
	}
	b.StopTimer()
	cancel()
	<-done
	var steady, reload []int64
	sink.mu.Lock()
	for _, r := range sink.results[200:] {
		in := false
		for _, w := range windows {
			if r.TCaptureNs >= w.from && r.TCaptureNs <= w.to {
				in = true
				break
			}
		}
		if in {
			reload = append(reload, r.Latency.Total)
		} else {
			steady = append(steady, r.Latency.Total)
		}
	}
	sink.mu.Unlock()
	if len(reload) == 0 || len(steady) == 0 {
		b.Fatal("no samples")
	}
	slices.Sort(steady)
	slices.Sort(reload)
	p99 := func(v []int64) float64 { return float64(v[len(v)*99/100]) }
	b.ReportMetric(p99(steady), "steady-p99-us")
	b.ReportMetric(p99(reload), "reload-p99-us")
	b.ReportMetric(p99(reload)/p99(steady), "reload/steady")
	b.ReportMetric(float64(len(reload)), "frames-in-windows")
}

func waitResultsB(b *testing.B, s *recordingSink, n int) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		s.mu.Lock()
		k := len(s.results)
		s.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("no results")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
