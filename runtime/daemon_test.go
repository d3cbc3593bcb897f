package runtime

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/internal/demoscene"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/onnx"
	"github.com/edged-dev/edged/trt/trttest"
	"github.com/edged-dev/edged/umem"
	"github.com/edged-dev/edged/umem/umemtest"
)

// recordingSink keeps copies of what it is given.
type recordingSink struct {
	mu      sync.Mutex
	results []stream.Record
	status  []stream.Record
	got     chan struct{}
	closed  bool
}

func newRecordingSink() *recordingSink { return &recordingSink{got: make(chan struct{}, 1)} }

func (s *recordingSink) Publish(r *stream.Record) {
	c := *r
	c.Outputs = make([]stream.Output, len(r.Outputs))
	for i, o := range r.Outputs {
		o.Data = append([]float32(nil), o.Data...)
		o.Classes = append([]stream.Class(nil), o.Classes...)
		o.Detections = append([]stream.Detection(nil), o.Detections...)
		c.Outputs[i] = o
	}
	c.Sensors = append([]sensors.Sample(nil), r.Sensors...)
	s.mu.Lock()
	if r.Kind == stream.KindResult {
		s.results = append(s.results, c)
	} else {
		s.status = append(s.status, c)
	}
	s.mu.Unlock()
	select {
	case s.got <- struct{}{}:
	default:
	}
}
func (s *recordingSink) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (s *recordingSink) Close() error                  { s.mu.Lock(); s.closed = true; s.mu.Unlock(); return nil }

func (s *recordingSink) waitResults(t *testing.T, n int, timeout time.Duration) []stream.Record {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if len(s.results) >= n {
			out := append([]stream.Record(nil), s.results...)
			s.mu.Unlock()
			return out
		}
		s.mu.Unlock()
		select {
		case <-s.got:
		case <-deadline:
			t.Fatalf("timed out waiting for %d results (have %d)", n, len(s.results))
		}
	}
}

// fakeNotifier records sd_notify states, one per line, and how many
// results the sink had when READY=1 came.
type fakeNotifier struct {
	mu           sync.Mutex
	states       []string
	sink         *recordingSink
	resultsReady int
}

func (f *fakeNotifier) Notify(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, line := range strings.Split(s, "\n") {
		if line == "READY=1" && f.sink != nil {
			f.sink.mu.Lock()
			f.resultsReady = len(f.sink.results)
			f.sink.mu.Unlock()
		}
		f.states = append(f.states, line)
	}
	return nil
}

func (f *fakeNotifier) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.states...)
}

func ortBackend(t *testing.T) trt.Backend {
	t.Helper()
	b, err := onnx.New(onnx.Options{})
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_ORT") == "1" {
			t.Fatalf("ONNX Runtime required: %v", err)
		}
		t.Skipf("ONNX Runtime not available (set EDGED_ONNXRUNTIME_LIB or run make deps): %v", err)
	}
	return b
}

func syntheticOptions(sc *config.Source) synthetic.Options {
	pf, _ := sensors.ParsePixelFormat(sc.Format)
	return synthetic.Options{Name: sc.Name, Width: sc.Width, Height: sc.Height, Pixel: pf, FPS: sc.FPS, Seed: uint64(sc.Seed), PeriodFrames: sc.Period}
}

func testFactories(t testing.TB, sink Sink, backend trt.Backend) Factories {
	return Factories{
		Allocator: func(config.GPU) (umem.Allocator, string, error) { return umem.NewHost(), "test", nil },
		Camera: func(sc *config.Source, _ *config.Config) (sensors.Source, error) {
			return synthetic.New(syntheticOptions(sc))
		},
		Sensor: func(*config.Source, *config.Config) (sensors.SampleSource, error) {
			return nil, errors.New("no sensors in this test")
		},
		Backend: func(string, *config.Model, *config.Config) (trt.Backend, error) { return backend, nil },
		Sink: func(*config.Sink, *config.Config, net.Listener, ControlFunc) (Sink, error) {
			return sink, nil
		},
	}
}

// runDaemon starts a daemon with opts on its own goroutine. stop cancels
// its context (ctx) and returns Run's error; it may be called more than
// once. If the test has not stopped it by its end, cleanup does, and an
// error from Run then fails the test.
func runDaemon(tb testing.TB, opts Options) (*Daemon, context.Context, func() error) {
	tb.Helper()
	d, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var (
		once    sync.Once
		runErr  error
		stopped atomic.Bool // the test stopped it and saw the error
	)
	halt := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	tb.Cleanup(func() {
		if err := halt(); err != nil && !stopped.Load() {
			tb.Errorf("Run: %v", err)
		}
	})
	return d, ctx, func() error { stopped.Store(true); return halt() }
}

// mustReplace edits configuration text, failing the test when old is not
// there: an edit that silently stops matching the embedded default would
// test something else than it says.
func mustReplace(t testing.TB, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("config edit: %q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

func defaultConfig(t *testing.T, edit func(string) string) *config.Config {
	t.Helper()
	return parseConfig(t, defaultConfigText(t, edit))
}

// defaultConfigText is the embedded default's text, edited.
func defaultConfigText(t testing.TB, edit func(string) string) string {
	text := string(configs.Default)
	if edit != nil {
		text = edit(text)
	}
	return text
}

func parseConfig(t testing.TB, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDemoPipelineEndToEnd runs the embedded default configuration with the
// real synthetic camera and the real demo model on ONNX Runtime, and checks
// every result against what the camera drew for that frame.
func TestDemoPipelineEndToEnd(t *testing.T) {
	backend := ortBackend(t)
	sink := newRecordingSink()
	notes := &fakeNotifier{sink: sink}
	cfg := defaultConfig(t, func(s string) string { return mustReplace(t, s, "fps = 30.0", "fps = 100.0") })
	cfg.Daemon.DeviceID = "jetson-07"
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend), Notifier: notes, WatchdogInterval: 200 * time.Millisecond})
	results := sink.waitResults(t, 200, 60*time.Second)

	opts := syntheticOptions(cfg.Source("cam0"))
	var last uint64
	for i, r := range results[:200] {
		if i > 0 && r.FrameSeq <= last {
			t.Fatalf("frame_seq not increasing: %d after %d", r.FrameSeq, last)
		}
		last = r.FrameSeq
		if r.Device != "jetson-07" {
			t.Fatalf("result device %q, want the configured jetson-07", r.Device)
		}
		truth := synthetic.TruthAt(opts, r.FrameSeq)
		if len(r.Outputs) != 2 || r.Outputs[0].Name != "class" || r.Outputs[1].Name != "centroid" {
			t.Fatalf("outputs %+v", r.Outputs)
		}
		cls := r.Outputs[0].Classes[0]
		if cls.Index != truth.Background || cls.Label != demoscene.Labels[truth.Background] {
			t.Fatalf("frame %d: class %d (%s), the camera drew background %d", r.FrameSeq, cls.Index, cls.Label, truth.Background)
		}
		cx, cy := float64(r.Outputs[1].Data[0])*float64(opts.Width), float64(r.Outputs[1].Data[1])*float64(opts.Height)
		if math.Abs(cx-truth.CenterX) > 12 || math.Abs(cy-truth.CenterY) > 12 {
			t.Fatalf("frame %d: centroid (%.1f, %.1f), the square's centre is (%.1f, %.1f)", r.FrameSeq, cx, cy, truth.CenterX, truth.CenterY)
		}
		if r.Engine.Name != "demo" || r.Engine.Generation != 1 || len(r.Engine.SHA256) != 12 {
			t.Fatalf("engine %+v", r.Engine)
		}
		if r.Latency.Total <= 0 || r.Latency.Infer <= 0 || r.TCaptureNs <= 0 {
			t.Fatalf("latency %+v t_capture %d", r.Latency, r.TCaptureNs)
		}
	}
	// READY=1 only after the first result; watchdog pings while frames flow.
	states := notes.all()
	ready := indexOf(states, "READY=1")
	if ready < 0 {
		t.Fatalf("no READY=1 in %q", states)
	}
	if notes.resultsReady < 1 {
		t.Fatalf("READY=1 sent before the first result was published")
	}
	// Pinged every 200 ms while frames flow; waited for, generously.
	deadline := time.Now().Add(30 * time.Second)
	for count(notes.all(), "WATCHDOG=1") < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(notes.all(), "WATCHDOG=1"); n < 1 {
		t.Errorf("no WATCHDOG=1 pings: %q", notes.all())
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(cfg.Daemon.StopTimeout.Duration + 5*time.Second):
		t.Fatal("daemon did not stop")
	}
	if took := time.Since(start); took > cfg.Daemon.StopTimeout.Duration {
		t.Errorf("stop took %v, more than the stop budget (%v)", took, cfg.Daemon.StopTimeout.Duration)
	}
	if indexOf(notes.all(), "STOPPING=1") < 0 {
		t.Error("no STOPPING=1")
	}
	if !sink.closed {
		t.Error("sink not closed")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, r := range sink.status {
		if r.Device != "jetson-07" {
			t.Errorf("status %s: device %q", r.Event, r.Device)
		}
	}
}

// TestDeviceID: the configured id wins; else /etc/machine-id, trimmed;
// else the host name.
func TestDeviceID(t *testing.T) {
	old := machineIDPath
	t.Cleanup(func() { machineIDPath = old })
	dir := t.TempDir()
	machineIDPath = filepath.Join(dir, "machine-id")
	os.WriteFile(machineIDPath, []byte("0123abcd\n"), 0o644)
	if id, from := DeviceID("cam-7"); id != "cam-7" || from != "config" {
		t.Errorf("configured: %s %s", id, from)
	}
	if id, from := DeviceID(""); id != "0123abcd" || from != "machine-id" {
		t.Errorf("machine-id: %s %s", id, from)
	}
	machineIDPath = filepath.Join(dir, "none")
	host, _ := os.Hostname()
	if id, from := DeviceID(""); id != host || from != "hostname" {
		t.Errorf("hostname: %s %s, want %s", id, from, host)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func newORTForTest() (trt.Backend, error) { return onnx.New(onnx.Options{}) }

// TestContextLostExits: a sticky CUDA error (the context is unusable) makes
// the daemon stop and return an error, so systemd restarts it.
func TestContextLostExits(t *testing.T) {
	backend := ortBackend(t)
	old := failpoints
	failpoints = parseFailpoints("pipeline/context-lost=error:5")
	// A cleanup registered before the daemon's runs after it has stopped:
	// a deferred restore would race the pipeline still reading it.
	t.Cleanup(func() { failpoints = old })
	sink := newRecordingSink()
	cfg := defaultConfig(t, func(s string) string { return mustReplace(t, s, "fps = 30.0", "fps = 100.0") })
	d, _ := New(Options{Config: cfg, Factories: testFactories(t, sink, backend)})
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, umem.ErrContextLost) {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon kept running after the CUDA context was lost")
	}
	if n := len(sink.waitResults(t, 1, time.Second)); n < 4 {
		t.Errorf("%d results before the failure, want 4", n)
	}
}

// slowBackend's loads do not end before release is closed and ignore
// cancellation, as a TensorRT deserialisation or first inference inside
// the library does; entered is closed when the first load begins. It
// counts the engines it handed out that are still open.
type slowBackend struct {
	trt.Backend
	entered, release chan struct{}
	enterOnce        sync.Once
	loads, live      atomic.Int64
}

func (b *slowBackend) Load(ctx context.Context, model []byte, o trt.LoadOptions) (trt.Engine, error) {
	b.enterOnce.Do(func() { close(b.entered) })
	<-b.release
	e, err := b.Backend.Load(context.Background(), model, o)
	if err != nil {
		return nil, err
	}
	b.loads.Add(1)
	b.live.Add(1)
	return &countedEngine{Engine: e, live: &b.live}, nil
}

type countedEngine struct {
	trt.Engine
	live *atomic.Int64
	once sync.Once
}

func (e *countedEngine) Close() error {
	e.once.Do(func() { e.live.Add(-1) })
	return e.Engine.Close()
}

// TestStopDuringUninterruptibleStart: a stop asked for while the first
// model loads is a clean stop (Run returns nil) within the stop budget,
// even when the load cannot be interrupted; the start left behind then
// frees the engine it built and starts nothing. The load is held until
// Run has returned, so a Run that waited for it would never return (it
// used to be a 1.5 s load against a bound of 1 s, which a loaded machine
// could not tell apart).
func TestStopDuringUninterruptibleStart(t *testing.T) {
	slow := &slowBackend{Backend: ortBackend(t), entered: make(chan struct{}), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(slow.release)
		}
	}()
	sink := newRecordingSink()
	cfg := defaultConfig(t, func(s string) string { return mustReplace(t, s, `stop_timeout = "5s"`, `stop_timeout = "200ms"`) })
	d, err := New(Options{Config: cfg, Factories: testFactories(t, sink, slow)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-slow.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the model load never began")
	}
	t0 := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after a stop during start-up: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return while the model load it cannot interrupt goes on (stop budget 200ms)")
	}
	// 200 ms and a loaded machine's lateness; far below what a Run that
	// waited for anything but its budget would take.
	if took := time.Since(t0); took > 3*time.Second {
		t.Errorf("Run took %v to return, the stop budget is 200ms", took)
	}
	close(slow.release)
	released = true
	waitFor(t, 10*time.Second, func() bool { return slow.loads.Load() == 1 })
	// The start left behind finishes and closes what it built.
	waitFor(t, 10*time.Second, func() bool { return slow.live.Load() == 0 })
	time.Sleep(100 * time.Millisecond) // nothing more comes of it
	if n := slow.live.Load(); n != 0 {
		t.Errorf("%d engines left open by the abandoned start", n)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.results) != 0 {
		t.Errorf("the abandoned start ran a pipeline: %d results", len(sink.results))
	}
}

// specBackend loads the fake engine spec whatever model bytes it is given
// (the built-in model's, here).
type specBackend struct {
	*trttest.Backend
	spec trttest.Spec
}

func (b *specBackend) Load(ctx context.Context, _ []byte, o trt.LoadOptions) (trt.Engine, error) {
	return b.Backend.Load(ctx, b.spec.Bytes(), o)
}

// TestBuiltinModelIsStaged: the built-in model is accepted the one way any
// engine is, reload.Stage, with the reload transaction's checks. An engine
// whose output buffer is shorter than its shape passed the daemon's own
// warm-up before (it read nothing it could not see) and ran; now the start
// fails with trt.ErrWarmup, as a reload of such a file would.
func TestBuiltinModelIsStaged(t *testing.T) {
	demo := trttest.Spec{
		Inputs: []trt.TensorSpec{{Name: "image", Type: trt.Float32, Shape: []int64{1, 3, 64, 64}}},
		Outputs: []trt.TensorSpec{{Name: "class", Type: trt.Float32, Shape: []int64{1, 8}},
			{Name: "centroid", Type: trt.Float32, Shape: []int64{1, 2}}},
		Value: 0.5,
	}
	for _, c := range []struct {
		name  string
		short bool
		want  error
	}{{"sound", false, nil}, {"short outputs", true, trt.ErrWarmup}} {
		t.Run(c.name, func(t *testing.T) {
			spec := demo
			spec.ShortOutput = c.short
			sink := newRecordingSink()
			cfg := defaultConfig(t, nil)
			d, err := New(Options{Config: cfg, Factories: testFactories(t, sink, &specBackend{trttest.NewBackend(), spec})})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			if c.want == nil {
				sink.waitResults(t, 1, 30*time.Second)
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			defer cancel()
			select {
			case err := <-done:
				if !errors.Is(err, c.want) || !errors.Is(err, config.ErrInvalid) {
					t.Fatalf("Run: %v, want a configuration error wrapping %v", err, c.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the daemon runs an engine whose outputs do not fit their buffers")
			}
		})
	}
}

// TestEveryBufferReleased runs the daemon on umemtest's allocator, which
// counts the buffers it hands out: after a start, a configuration reload
// that rebuilds the pipeline (its engine carried over), and a stop, every
// frame slot and tensor has been released exactly once; and a start whose
// allocations fail part way returns an out-of-memory error having released
// what it had.
func TestEveryBufferReleased(t *testing.T) {
	backend := ortBackend(t)
	for _, failAfter := range []int{0, 1, 3} {
		alloc := umemtest.New(umemtest.Options{FailAfter: failAfter})
		sink := newRecordingSink()
		f := testFactories(t, sink, backend)
		f.Allocator = func(config.GPU) (umem.Allocator, string, error) { return alloc, "umemtest", nil }
		cfg := defaultConfig(t, func(s string) string { return mustReplace(t, s, "fps = 30.0", "fps = 100.0") })
		if failAfter > 0 {
			d, err := New(Options{Config: cfg, Factories: f})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Run(context.Background()); !errors.Is(err, umem.ErrOutOfMemory) {
				t.Fatalf("FailAfter %d: Run: %v, want umem.ErrOutOfMemory", failAfter, err)
			}
		} else {
			d, ctx, stop := runDaemon(t, Options{Config: cfg, Factories: f})
			sink.waitResults(t, 3, 30*time.Second)
			next := defaultConfig(t, func(s string) string { return mustReplace(t, s, "fps = 30.0", "fps = 50.0") })
			if err := d.Reload(ctx, next); err != nil {
				t.Fatalf("Reload: %v", err)
			}
			had := len(sink.waitResults(t, 1, time.Second))
			sink.waitResults(t, had+3, 30*time.Second)
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
		if n := alloc.Live(); n != 0 {
			t.Errorf("FailAfter %d: %d buffers not released after Run returned", failAfter, n)
		}
	}
}
