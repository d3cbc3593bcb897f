package runtime

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preview"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// nopEngine has the demo model's tensors and computes nothing, so a
// benchmark through it measures the pipeline's own per-frame work.
type nopEngine struct{ in, out []*trt.Tensor }

func newNopEngine(tb testing.TB) *nopEngine {
	alloc := umem.NewHost()
	mk := func(name string, shape ...int64) *trt.Tensor {
		spec := trt.TensorSpec{Name: name, Type: trt.Float32, Shape: shape}
		b, err := alloc.Alloc(int(spec.Bytes()))
		if err != nil {
			tb.Fatal(err)
		}
		return &trt.Tensor{TensorSpec: spec, Buf: b}
	}
	return &nopEngine{in: []*trt.Tensor{mk("image", 1, 3, 64, 64)}, out: []*trt.Tensor{mk("class", 1, 8), mk("centroid", 1, 2)}}
}

func (e *nopEngine) Backend() string                 { return "nop" }
func (e *nopEngine) Inputs() []*trt.Tensor           { return e.in }
func (e *nopEngine) Outputs() []*trt.Tensor          { return e.out }
func (e *nopEngine) Infer(ctx context.Context) error { return nil }
func (e *nopEngine) Close() error                    { return nil }

// benchPipeline builds the default pipeline around eng, with a real socket
// sink that one client drains, and a pool holding one synthetic frame.
func benchPipeline(tb testing.TB, eng trt.Engine) (*pipeline, *umem.Pool, sensors.Frame, func()) {
	cfg, err := config.Parse("", configs.Default)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	sock, err := socketsink.New(socketsink.Options{Name: "bench", Path: filepath.Join(dir, "b.sock"), NoActivation: true, QueueLen: 16})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go sock.Run(ctx)
	conn, err := net.Dial("unix", filepath.Join(dir, "b.sock"))
	if err != nil {
		tb.Fatal(err)
	}
	go io.Copy(io.Discard, conn)
	for sock.Stats().Clients == 0 {
		time.Sleep(time.Millisecond)
	}
	p := &pipeline{host: &fakeHost{}, stall: cfg.Daemon.StallTimeout.Duration, conf: cfg, cfg: &cfg.Pipelines[0], scfg: &cfg.Sources[0],
		log: slog.New(slog.DiscardHandler), hot: &trt.Hot{}, sinks: []Sink{sock}}
	if err := p.bind(eng); err != nil {
		tb.Fatal(err)
	}
	p.hot.Install(eng, "demo", [32]byte{1})
	p.state.Store(int32(stateRunning))
	p.published.Store(true)
	pool, err := umem.NewPool(umem.NewHost(), 2, 640*480*2)
	if err != nil {
		tb.Fatal(err)
	}
	src, err := synthetic.New(synthetic.Options{Width: 640, Height: 480, Pixel: sensors.YUYV, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	if err := src.Start(ctx, poolAdapter{pool}); err != nil {
		tb.Fatal(err)
	}
	f, err := src.Next(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	src.Close()
	// Keep the drawn frame's slot: each iteration retains it once and the
	// pipeline releases it, as it would a fresh capture.
	return p, pool, f, func() {
		f.Slot.Release()
		conn.Close()
		cancel()
		sock.Close()
		p.hot.Close()
		pool.Close()
	}
}

func runFrames(tb testing.TB, p *pipeline, f sensors.Frame, n int, lat []int64) []int64 {
	ctx := context.Background()
	slot := f.Slot.(*umem.Slot)
	for i := 0; i < n; i++ {
		slot.Retain()
		f.Seq = uint64(i)
		f.TCapture = monoNow()
		t0 := monoNow()
		p.process(ctx, f)
		if lat != nil {
			lat = append(lat, monoNow()-t0)
		}
	}
	return lat
}

// steadyAllocs is testing.AllocsPerRun(runs, f) once the pipeline is in
// its steady state: it measures up to five rounds and returns 0 at the
// first round without allocations, else the fewest a round made. What
// the process allocates once, at a high-water mark it had not reached in
// the warm-up, is counted (AllocsPerRun counts every goroutine's heap
// allocations): the socket sink's record pool growing to the most records
// alive at once, when its writer is scheduled late on a loaded machine,
// and a native histogram's bucket the first time a latency falls in it,
// when emulation spreads the latencies past those seen. Those are spent
// after a round or two; an allocation made per frame is made in every
// round, and fails.
func steadyAllocs(t *testing.T, runs int, f func()) float64 {
	t.Helper()
	least := -1.0
	for round := range 5 {
		a := testing.AllocsPerRun(runs, f)
		if a == 0 {
			return 0
		}
		t.Logf("round %d: %v heap allocations per run (a high-water mark reached late?)", round, a)
		if least < 0 || a < least {
			least = a
		}
	}
	return least
}

// TestSteadyStateFrameAllocatesNothing: a frame through preprocessing, the
// engine, post-processing and the socket sink allocates nothing on the Go
// heap once running (with the real ONNX Runtime engine when available).
func TestSteadyStateFrameAllocatesNothing(t *testing.T) {
	var eng trt.Engine = newNopEngine(t)
	if b, err := ortBackendOrNil(); err == nil {
		data, _ := config.BuiltinModel("demo")
		e, err := b.Load(context.Background(), data, trt.LoadOptions{Name: "demo", Alloc: umem.NewHost(), Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		eng = e
	}
	p, _, f, done := benchPipeline(t, eng)
	defer done()
	runFrames(t, p, f, 500, nil) // warm up: tables, buffers, the sink's record pool
	allocs := steadyAllocs(t, 200, func() { runFrames(t, p, f, 1, nil) })
	if allocs != 0 {
		t.Fatalf("%v heap allocations per frame with engine %s", allocs, eng.Backend())
	}
	t.Logf("0 allocations per frame with the %s engine", eng.Backend())
}

// TestSteadyStateWithPreviewAllocatesNothing: with the live preview on and
// nobody watching, a frame costs the preview one atomic load: the frame
// path still allocates nothing, and nothing is copied.
func TestSteadyStateWithPreviewAllocatesNothing(t *testing.T) {
	p, _, f, done := benchPipeline(t, newNopEngine(t))
	defer done()
	hub := preview.New(preview.Options{Settings: preview.Settings{Enabled: true}})
	defer hub.Close()
	p.tap = hub.Tap(preview.Key{Pipeline: p.cfg.Name, Source: p.scfg.Name})
	runFrames(t, p, f, 500, nil)
	allocs := steadyAllocs(t, 200, func() { runFrames(t, p, f, 1, nil) })
	if allocs != 0 {
		t.Fatalf("%v heap allocations per frame with the preview on and nobody watching", allocs)
	}
	if n, why := p.tap.Skipped(); n != 0 || p.tap.Due(monoNow()) {
		t.Fatalf("the tap is due or skipped frames (%d: %s) with nobody watching", n, why)
	}
}

// BenchmarkFramePreview is BenchmarkFrameOverhead with the live preview:
// off (no tap: the baseline), on with nobody watching, and watched by one
// and by four viewers of the MJPEG stream (real HTTP clients; 5 pictures a
// second, copied from the frames this loop processes, encoded once and
// sent to each viewer), with the whole process's CPU time per frame
// (cpu-ns/frame: the pipeline, the tap's renderer and the viewer's
// server). docs/PERFORMANCE.md ("Live preview") has the numbers.
func BenchmarkFramePreview(b *testing.B) {
	for _, mode := range []string{"off", "nobody-watching", "one-viewer", "four-viewers"} {
		b.Run(mode, func(b *testing.B) {
			p, _, f, done := benchPipeline(b, newNopEngine(b))
			defer done()
			if mode != "off" {
				hub := preview.New(preview.Options{Settings: preview.Settings{Enabled: true}})
				defer hub.Close()
				p.tap = hub.Tap(preview.Key{Pipeline: p.cfg.Name, Source: p.scfg.Name})
				viewers := map[string]int{"one-viewer": 1, "four-viewers": 4}[mode]
				watch(b, hub, "/preview/"+p.cfg.Name+".mjpeg", viewers)
				if viewers > 0 {
					// The first picture: the viewers are in and the renderer runs.
					for deadline := time.Now().Add(10 * time.Second); hub.Tap(preview.Key{Pipeline: p.cfg.Name, Source: p.scfg.Name}).Viewers() < viewers; {
						if time.Now().After(deadline) {
							b.Fatalf("%d viewers did not get in", viewers)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
			runFrames(b, p, f, 100, nil)
			lat := make([]int64, 0, b.N)
			b.ReportAllocs()
			cpu0 := cpuNs()
			b.ResetTimer()
			lat = runFrames(b, p, f, b.N, lat)
			b.StopTimer()
			b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N), "cpu-ns/frame")
			reportQuantiles(b, lat)
		})
	}
}

// watch has n viewers read path of hub's routes, as a viewer would, until
// the benchmark ends.
func watch(tb testing.TB, hub *preview.Hub, path string, n int) {
	if n == 0 {
		return
	}
	mux := http.NewServeMux()
	hub.Register(mux)
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	for range n {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { r.Body.Close() })
		go io.Copy(io.Discard, r.Body)
	}
}

// cpuNs is the process's user and system CPU time.
func cpuNs() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkFrameOverhead is the pipeline's own cost per 640x480 YUYV frame
// (preprocessing to 64x64, post-processing, NDJSON encoding and fan-out to
// one socket client), with an engine that computes nothing.
func BenchmarkFrameOverhead(b *testing.B) {
	p, _, f, done := benchPipeline(b, newNopEngine(b))
	defer done()
	runFrames(b, p, f, 100, nil)
	lat := make([]int64, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	lat = runFrames(b, p, f, b.N, lat)
	b.StopTimer()
	reportQuantiles(b, lat)
}

// BenchmarkBaselineFrameCopy copies one 640x480 YUYV frame: the cost a
// pipeline that copies each frame once would pay before doing any work.
func BenchmarkBaselineFrameCopy(b *testing.B) {
	src := make([]byte, 640*480*2)
	dst := make([]byte, len(src))
	lat := make([]int64, 0, b.N)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		t0 := monoNow()
		copy(dst, src)
		lat = append(lat, monoNow()-t0)
	}
	reportQuantiles(b, lat)
}

func reportQuantiles(b *testing.B, lat []int64) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}

func ortBackendOrNil() (trt.Backend, error) {
	return newORTForTest()
}
