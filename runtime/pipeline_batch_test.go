package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/edged-dev/edged/runtime/batch"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preview"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/umem"
)

// batchVariant is demo model variant n with a dynamic batch dimension.
func batchVariant(t *testing.T, n int) []byte {
	t.Helper()
	b, err := demomodel.Build(demomodel.Options{Permutation: n, DynamicBatch: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// batchedConfig is the default configuration with its pipeline made a
// batched pipeline of n synthetic 160x120 cameras cam0.. at fps (queue
// schedule: every frame) on model file path; extra is appended to the
// pipeline table.
func batchedConfig(t *testing.T, n int, fps float64, path, extra string) string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%q", fmt.Sprintf("cam%d", i))
	}
	text := defaultConfigText(t, func(s string) string {
		s = mustReplace(t, s, "fps = 30.0", fmt.Sprintf("fps = %.1f", fps))
		s = mustReplace(t, s, "width = 640 ", "width = 160 ")
		s = mustReplace(t, s, "height = 480", "height = 120")
		s = mustReplace(t, s, `schedule = "latest"`, `schedule = "queue"`)
		s = mustReplace(t, s, `source = "cam0"`, "sources = ["+strings.Join(names, ", ")+"]"+extra)
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
`, i, fps)
	}
	return b.String()
}

// checkBatchedResults checks every result of a batched pipeline: its
// camera is one of cfg's, each camera's frames come one after another
// (nothing lost), generations never go back, each result is the class
// the camera drew under the variant its generation names, the batch is
// 1 to max frames and the latency's stages add up to its total. It
// returns the results per camera.
func checkBatchedResults(t *testing.T, cfg *config.Config, results []stream.Record, max int) map[string]int {
	t.Helper()
	opts := map[string]synthetic.Options{}
	for _, name := range cfg.Pipelines[0].Sources {
		opts[name] = syntheticOptions(cfg.Source(name))
	}
	last := map[string]stream.Record{}
	per := map[string]int{}
	for _, r := range results {
		o, ok := opts[r.Source]
		if !ok {
			t.Fatalf("result of source %q, not a camera of the pipeline", r.Source)
		}
		if p, ok := last[r.Source]; ok {
			if r.FrameSeq != p.FrameSeq+1 {
				t.Fatalf("camera %s: frame %d followed by %d: frames were lost", r.Source, p.FrameSeq, r.FrameSeq)
			}
			if r.Engine.Generation < p.Engine.Generation {
				t.Fatalf("camera %s: generation went back from %d to %d", r.Source, p.Engine.Generation, r.Engine.Generation)
			}
		}
		last[r.Source] = r
		per[r.Source]++
		if b := r.Engine.Batch; b < 1 || b > max {
			t.Fatalf("camera %s frame %d: engine.batch %d, want 1 to %d", r.Source, r.FrameSeq, b, max)
		}
		l := r.Latency
		if sum := l.Fill + l.Queue + l.Batch + l.Pre + l.Infer + l.Post; sum != l.Total || l.Batch < 0 {
			t.Fatalf("camera %s frame %d: stages %+v add up to %d, not the total", r.Source, r.FrameSeq, l, sum)
		}
		v := int(r.Engine.Generation-1) % 8
		want := demomodel.Expected(synthetic.TruthAt(o, r.FrameSeq).Background, v)
		if got := r.Outputs[0].Classes[0].Index; got != want {
			t.Fatalf("camera %s frame %d, generation %d: class %d, want %d (another camera's frame, or another entry's result?)",
				r.Source, r.FrameSeq, r.Engine.Generation, got, want)
		}
	}
	return per
}

// TestBatchedPipeline: four cameras in one batched pipeline run as
// batches on one engine with a dynamic batch dimension; every frame of
// every camera gives its own record (its source, its frame_seq in order,
// the class its own picture shows), batches hold up to four frames, and
// the wait for the batch is a stage of its own that adds up with the
// others to the total.
func TestBatchedPipeline(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0))
	cfg := parseConfig(t, batchedConfig(t, 4, 60, model, ""))
	sink := newRecordingSink()
	d, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, ortBackend(t))})
	waitFor(t, 60*time.Second, func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.results) >= 200
	})
	checkBatchStageMetric(t, d, cfg.Pipelines[0].Name)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	per := checkBatchedResults(t, cfg, sink.results, 4)
	batches := map[int]int{}
	for _, r := range sink.results {
		batches[r.Engine.Batch]++
	}
	if len(per) != 4 {
		t.Fatalf("results from %d cameras, want 4: %v", len(per), per)
	}
	if batches[1] == len(sink.results) {
		t.Errorf("every inference ran one frame: %v", batches)
	}
	t.Logf("%d results, per camera %v, frames by batch size %v", len(sink.results), per, batches)
}

// checkBatchStageMetric: a batched pipeline's edged_stage_seconds has the
// batch stage, and the six stages add up to edged_latency_seconds (in a
// scrape where every histogram counted the same results: one of up to
// 50, as results keep coming).
func checkBatchStageMetric(t *testing.T, d *Daemon, pipeline string) {
	t.Helper()
	for try := 0; ; try++ {
		fams, err := d.d.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		mfs := map[string]*dto.MetricFamily{}
		for _, mf := range fams {
			mfs[mf.GetName()] = mf
		}
		sum, total, same := stageSums(t, mfs, pipeline, []string{"fill", "queue", "batch", "pre", "infer", "post"}, nil)
		if total == 0 {
			t.Fatalf("no results in edged_latency_seconds{pipeline=%q}", pipeline)
		}
		if !same {
			if try == 50 {
				t.Fatal("in 50 scrapes the stage histograms never counted the results the latency histogram did")
			}
			continue
		}
		if math.Abs(sum-total) > 1e-9*total+1e-9 {
			t.Errorf("the stages add up to %v s, the latency to %v s", sum, total)
		}
		return
	}
}

// TestBatchWaitDefault: batch_wait's default is the policy's DefaultWait
// (runtime/config cannot import runtime/batch, so it has its own copy).
func TestBatchWaitDefault(t *testing.T) {
	if config.DefaultBatchWait != batch.DefaultWait {
		t.Fatalf("config.DefaultBatchWait %v, batch.DefaultWait %v", config.DefaultBatchWait, batch.DefaultWait)
	}
}

// batchBench is a batched pipeline of four 640x480 YUYV cameras on the
// demo model with a dynamic batch dimension in ONNX Runtime, publishing
// to a real socket sink with a reading client, its Batcher made, and one
// drawn frame whose slot each Put retains once (the pipeline releases it,
// as it would a fresh capture).
func batchBench(t *testing.T) (*pipeline, sensors.Frame, func()) {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0))
	cfg := parseConfig(t, batchedConfig(t, 4, 30, model, ""))
	pc := &cfg.Pipelines[0]
	sock, err := socketsink.New(socketsink.Options{Name: "bench", Path: filepath.Join(dir, "b.sock"), NoActivation: true, QueueLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go sock.Run(ctx)
	conn, err := net.Dial("unix", filepath.Join(dir, "b.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, conn)
	for sock.Stats().Clients == 0 {
		time.Sleep(time.Millisecond)
	}
	lane := func(name string) *pipeline {
		return &pipeline{host: &fakeHost{}, stall: cfg.Daemon.StallTimeout.Duration, conf: cfg, cfg: pc, scfg: cfg.Source(name),
			log: slog.New(slog.DiscardHandler), hot: &trt.Hot{}, sinks: []Sink{sock}}
	}
	p := lane("cam0")
	p.bat = &batchGroup{lanes: []*pipeline{p, lane("cam1"), lane("cam2"), lane("cam3")}}
	data, _ := os.ReadFile(model)
	eng, err := ortBackend(t).Load(ctx, data, LoadOptions(cfg, cfg.Model(pc.Model), pc, umem.NewHost()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.bind(eng); err != nil {
		t.Fatal(err)
	}
	p.hot.Install(eng, "demo", [32]byte{1})
	if err := p.newBatcher(); err != nil {
		t.Fatal(err)
	}
	p.state.Store(int32(stateRunning))
	p.published.Store(true)
	pool, err := umem.NewPool(umem.NewHost(), 2, 640*480*2)
	if err != nil {
		t.Fatal(err)
	}
	src, err := synthetic.New(synthetic.Options{Width: 640, Height: 480, Pixel: sensors.YUYV, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx, poolAdapter{pool}); err != nil {
		t.Fatal(err)
	}
	f, err := src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	return p, f, func() {
		p.bat.b.Close()
		f.Slot.Release()
		conn.Close()
		cancel()
		sock.Close()
		pool.Close()
		p.hot.Close()
	}
}

// runBatches puts a frame of each camera and runs the batch they make, n
// times.
func runBatches(t *testing.T, p *pipeline, f sensors.Frame, n int) {
	ctx := context.Background()
	slot := f.Slot.(*umem.Slot)
	g := p.bat
	for i := range n {
		for _, l := range g.lanes {
			slot.Retain()
			f.Seq, f.TCapture = uint64(i), monoNow()
			if _, err := g.b.Put(ctx, l.cam, f); err != nil {
				t.Fatal(err)
			}
		}
		ok, _, err := g.b.TryNext(g.cur)
		if !ok || err != nil || g.cur.Len() != len(g.lanes) {
			t.Fatalf("no full batch: %v %v, %d frames", ok, err, g.cur.Len())
		}
		p.processBatch(ctx, g.cur)
	}
}

// TestSteadyStateBatchAllocatesNothing: a batch of four frames through
// the Batcher, preprocessing into the batched input, one inference of the
// real ONNX Runtime engine, post-processing of each entry and four records
// to the socket sink allocates nothing on the Go heap once running.
func TestSteadyStateBatchAllocatesNothing(t *testing.T) {
	p, f, done := batchBench(t)
	defer done()
	runBatches(t, p, f, 200) // warm up: tables, buffers, the sink's record pool
	results := p.stats.results.Load()
	allocs := steadyAllocs(t, 100, func() { runBatches(t, p, f, 1) })
	if allocs != 0 {
		t.Fatalf("%v heap allocations per batch of 4", allocs)
	}
	if got := p.stats.results.Load() - results; got < 4*100 {
		t.Fatalf("%d results from the measured batches, want at least 400", got)
	}
}

// TestBatchedSharedEngineReload: 50 hot reloads of the model of a
// batched pipeline of four cameras swap its engine between two batches:
// every camera sees every frame (no frame_seq gap), each swap is one new
// generation for all four cameras, every result is computed by the
// variant its generation names, and a broken file in between is never
// served.
func TestBatchedSharedEngineReload(t *testing.T) {
	if testing.Short() {
		t.Skip("50 reloads under four cameras take most of a minute")
	}
	const cams, reloads = 4, 50
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0))
	cfg := parseConfig(t, batchedConfig(t, cams, 60, model, ""))
	sink := newRecordingSink()
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, ortBackend(t))})
	allAt := func(gen uint64) bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		seen := map[string]uint64{}
		for _, r := range sink.results {
			seen[r.Source] = r.Engine.Generation
		}
		if len(seen) < cams {
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
	nan, err := demomodel.Build(demomodel.Options{NaN: true, DynamicBatch: true})
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for k := 1; k <= reloads; k++ {
		if k%10 == 3 { // a broken file: rejected, the serving engine stays
			writeAtomic(t, model, nan)
			rejected++
			waitRejected(t, sink, rejected)
		}
		writeAtomic(t, model, batchVariant(t, k%8))
		deadline := time.Now().Add(30 * time.Second)
		for !allAt(uint64(k + 1)) {
			if time.Now().After(deadline) {
				t.Fatalf("reload %d: not every camera at generation %d", k, k+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	per := checkBatchedResults(t, cfg, sink.results, cams)
	gens := map[uint64]map[string]bool{}
	for _, r := range sink.results {
		if gens[r.Engine.Generation] == nil {
			gens[r.Engine.Generation] = map[string]bool{}
		}
		gens[r.Engine.Generation][r.Source] = true
	}
	for g := uint64(1); g <= reloads+1; g++ {
		if len(gens[g]) != cams {
			t.Errorf("generation %d served to %d cameras, want all %d", g, len(gens[g]), cams)
		}
	}
	if len(gens) != reloads+1 {
		t.Errorf("%d generations served, want %d (one per swap)", len(gens), reloads+1)
	}
	if n := countStatus(sink, "engine_reloaded"); n != reloads {
		t.Errorf("%d engine_reloaded events, want %d", n, reloads)
	}
	t.Logf("%d results over %d reloads (%d rejected), per camera %v, no frame lost", len(sink.results), reloads, rejected, per)
}

// dyingSource delivers a few frames, then fails and never starts again:
// a camera unplugged for good.
type dyingSource struct {
	sensors.Source
	left    atomic.Int64
	started atomic.Bool
}

func (s *dyingSource) Start(ctx context.Context, pool sensors.SlotPool) error {
	if s.started.Swap(true) {
		return sensors.ErrNotFound
	}
	return s.Source.Start(ctx, pool)
}

func (s *dyingSource) Next(ctx context.Context) (sensors.Frame, error) {
	if s.left.Add(-1) < 0 {
		return sensors.Frame{}, sensors.ErrDeviceGone
	}
	return s.Source.Next(ctx)
}

// TestBatchedCameraStalledOrGone: of four cameras batched together, one
// delivers 2 frames a second (stalled, as seen by the others) and one
// goes away for good after 10 frames; the other two never wait for a
// batch longer than batch_wait (plus scheduling), and keep their rate.
func TestBatchedCameraStalledOrGone(t *testing.T) {
	const wait = 40 * time.Millisecond
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0))
	text := mustReplace(t, batchedConfig(t, 4, 30, model, ""), `batch_wait = "2ms"`, `batch_wait = "40ms"`)
	cfg := parseConfig(t, text)
	cfg.Source("cam2").FPS = 2
	sink := newRecordingSink()
	f := testFactories(t, sink, ortBackend(t))
	camera := f.Camera
	f.Camera = func(sc *config.Source, c *config.Config) (sensors.Source, error) {
		src, err := camera(sc, c)
		if err != nil || sc.Name != "cam3" {
			return src, err
		}
		d := &dyingSource{Source: src}
		d.left.Store(10)
		return d, nil
	}
	dd, _, stop := runDaemon(t, Options{Config: cfg, Factories: f})
	count := func() map[string]int {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		per := map[string]int{}
		for _, r := range sink.results {
			per[r.Source]++
		}
		return per
	}
	waitFor(t, 60*time.Second, func() bool { return count()["cam0"] >= 90 })
	parts, _ := pipelineParts(dd.d.currentGraph())
	if len(parts) != 1 || !strings.Contains(parts[0], "cameras down: cam3") || !strings.HasPrefix(parts[0], "demo ") || strings.Contains(parts[0], "waiting") {
		t.Errorf("STATUS= says %q, want the pipeline running with cam3 down", parts)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	per := checkBatchedResults(t, cfg, sink.results, 4)
	slack := 25 * time.Millisecond // scheduling on a loaded machine
	if raceEnabled {
		slack *= 4
	}
	var worst int64
	for _, r := range sink.results {
		if r.Source == "cam0" || r.Source == "cam1" {
			worst = max(worst, r.Latency.Batch)
		}
	}
	if time.Duration(worst)*time.Microsecond > wait+slack {
		t.Errorf("cam0 and cam1 waited up to %v for a batch, more than batch_wait %v (+%v)", time.Duration(worst)*time.Microsecond, wait, slack)
	}
	if per["cam3"] > 10 || per["cam2"] == 0 || per["cam2"] > per["cam0"]/5 {
		t.Errorf("results per camera %v: want cam3 at most 10 (it went away), cam2 a few (2 fps)", per)
	}
	t.Logf("STATUS= %q", parts)
	t.Logf("results per camera %v; the others' longest wait for a batch %v (batch_wait %v)", per, time.Duration(worst)*time.Microsecond, wait)
}

// TestBatchedPreviewPerCamera: the live preview shows each camera of a
// batched pipeline on its own (/preview/<pipeline>/<camera>.jpg, with
// that camera's frame and the results of its record), and status.json
// lists the pipeline once with all its cameras.
func TestBatchedPreviewPerCamera(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0))
	sock := filepath.Join(dir, "metrics.sock")
	text := batchedConfig(t, 3, 30, model, "")
	text = mustReplace(t, text, `metrics_listen = ""`, `metrics_listen = "unix:`+sock+`"`)
	text = mustReplace(t, text, "preview = false", "preview = true")
	sink := newRecordingSink()
	_, _, stop := runDaemon(t, Options{Config: parseConfig(t, text), Factories: testFactories(t, sink, ortBackend(t))})
	defer stop()
	sink.waitResults(t, 30, 30*time.Second)
	c := unixClient(sock)
	for _, cam := range []string{"cam0", "cam1", "cam2"} {
		r, b := httpGet(t, c, "/preview/demo/"+cam+".jpg")
		if r.StatusCode != 200 {
			t.Fatalf("/preview/demo/%s.jpg: %s %s", cam, r.Status, b)
		}
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != 160 {
			t.Fatalf("%s: picture %v: %v", cam, img.Bounds(), err)
		}
		if r.Header.Get("X-Edged-Engine") == "" || r.Header.Get("X-Edged-Frame-Seq") == "" {
			t.Errorf("%s: picture without its result's engine or frame: %v", cam, r.Header)
		}
	}
	_, b := httpGet(t, c, "/status.json")
	var st preview.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Pipelines) != 1 || len(st.Pipelines[0].Sources) != 3 {
		t.Fatalf("status.json: %s", b)
	}
	for i, s := range st.Pipelines[0].Sources {
		if want := fmt.Sprintf("/preview/demo/cam%d.jpg", i); !s.Up || s.Picture != want || s.Format == "" {
			t.Errorf("status.json camera %d: %+v, want up, picture %s", i, s, want)
		}
	}
	if st.Pipelines[0].Requested != 90 {
		t.Errorf("status.json requested %v fps, want 90 (3 cameras at 30)", st.Pipelines[0].Requested)
	}
}

// TestModelThreads: a model's ONNX Runtime threads are its threads when
// set; left at 0, 1 for pipelines of one camera and, when a batched
// pipeline names the model, its batch capped at the cores; and the
// engines are reloaded when that changes (their key changes).
func TestModelThreads(t *testing.T) {
	cores := goruntime.NumCPU()
	model := filepath.Join(t.TempDir(), "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0)) // a symbolic batch dimension
	single := parseConfig(t, defaultConfigText(t, nil))
	if n, why := ModelThreads(single, &single.Models[0]); n != 1 || !strings.Contains(why, "threads = 0") {
		t.Errorf("one camera: %d threads (%s), want 1", n, why)
	}
	for _, tc := range []struct {
		batch, threads, want int
		why                  string
	}{
		{0, 0, min(3, cores), "batched pipeline demo's batch"},
		{2, 0, min(2, cores), "batched pipeline demo's batch"},
		{3, 5, 5, "threads"},
	} {
		text := batchedConfig(t, 3, 30, model, "")
		text = mustReplace(t, text, "batch = 0 ", fmt.Sprintf("batch = %d ", tc.batch))
		text = mustReplace(t, text, "threads = 0               # CPU threads for ONNX Runtime", fmt.Sprintf("threads = %d # CPU threads for ONNX Runtime", tc.threads))
		c := parseConfig(t, text)
		n, why := ModelThreads(c, &c.Models[0])
		if n != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("batch %d, threads %d: %d threads (%s), want %d (%s)", tc.batch, tc.threads, n, why, tc.want, tc.why)
		}
		if o := LoadOptions(c, &c.Models[0], &c.Pipelines[0], nil); o.Threads != n {
			t.Errorf("batch %d, threads %d: loaded with %d threads, ModelThreads says %d", tc.batch, tc.threads, o.Threads, n)
		}
		if cores > 1 && tc.threads == 0 && engineKey(c, &c.Pipelines[0]) == engineKey(single, &single.Pipelines[0]) {
			t.Errorf("batch %d: the engine key does not change with the threads", tc.batch)
		}
	}
	// Beyond the cores: capped, and said so.
	text := batchedConfig(t, cores+1, 30, model, "")
	c := parseConfig(t, text)
	if n, why := ModelThreads(c, &c.Models[0]); n != cores || !strings.Contains(why, "capped") {
		t.Errorf("%d sources on %d cores: %d threads (%s)", cores+1, cores, n, why)
	}
}
