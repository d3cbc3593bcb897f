package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/umem"
)

// latencyBuckets are the classic buckets (seconds) of the per-frame
// histograms: a frame takes milliseconds, so they are dense from 0.5 ms to
// 100 ms and sparse up to 5 s. The native (exponential) buckets beside
// them need no choice.
var latencyBuckets = []float64{
	0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03,
	0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5,
}

// stageBuckets (seconds) reach down to the microseconds a queue wait or a
// post-processing step takes. The stage histograms have classic buckets
// only: their small values wander over many native buckets, each of which
// allocates once when first hit, and a frame must not allocate.
var stageBuckets = append([]float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025}, latencyBuckets...)

// reloadBuckets (seconds) suit a reload transaction: reading, hashing,
// loading and warming up an engine takes from tens of milliseconds (a
// small ONNX model) to a minute (a large TensorRT plan on a Jetson).
var reloadBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// histogramOpts are the options every edged histogram shares: the classic
// buckets given, and native histograms (Prometheus 2.40+, scraped with
// protobuf) with a growth factor of 1.1 between buckets (schema 3).
func histogramOpts(name, help string, buckets []float64, constLabels prometheus.Labels) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: buckets, ConstLabels: constLabels,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

// pipelineMetrics are a pipeline's per-frame histograms. They are made once
// per pipeline, with the pipeline's name bound as a label, before its first
// frame, so a frame only observes them: no label lookup and no allocation.
// The daemon's collector exports those of the running graph's pipelines;
// like the pipeline's counters, they start from zero when the pipeline is
// rebuilt.
type pipelineMetrics struct {
	latency   prometheus.Histogram // capture to result
	inference prometheus.Histogram // the engine's Infer
	stages    *prometheus.HistogramVec
	stage     [nStages]prometheus.Observer // stages' children, bound once
}

// The stages of edged_stage_seconds, as latency_us names them in a result
// (docs/PROTOCOL.md). encode is per sink (and per client), so it is only in
// the record.
const (
	stageFill = iota
	stageQueue
	stagePre
	stageInfer
	stagePost
	stageBatch // batched pipelines only
	nStages
)

var stageNames = [nStages]string{"fill", "queue", "pre", "infer", "post", "batch"}

// newPipelineMetrics makes a pipeline's histograms; a batched one's
// edged_stage_seconds has the batch stage too (latency_us.batch).
func newPipelineMetrics(pipeline string, batched bool) pipelineMetrics {
	l := prometheus.Labels{"pipeline": pipeline}
	m := pipelineMetrics{
		latency: prometheus.NewHistogram(histogramOpts("edged_latency_seconds",
			"Capture to result latency: from the frame's capture stamp to the result handed to the sinks.", latencyBuckets, l)),
		inference: prometheus.NewHistogram(histogramOpts("edged_inference_seconds",
			"Inference time: the engine's run on one frame (a batched pipeline: on its batch).", latencyBuckets, l)),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "edged_stage_seconds",
			Help:    "Time of each stage of a result (fill, queue, batch, pre, infer, post: latency_us of the record; batch only for batched pipelines), which add up to edged_latency_seconds.",
			Buckets: stageBuckets, ConstLabels: l}, []string{"stage"}),
	}
	for i, name := range stageNames {
		if i != stageBatch || batched {
			m.stage[i] = m.stages.WithLabelValues(name)
		}
	}
	return m
}

// observe records one result: it is the whole of the per-frame metrics
// work (atomic adds and histogram observations through children bound at
// start; no allocation). Times are CLOCK_MONOTONIC ns: the frame's
// capture, when it was ready (filled), when it reached the batcher
// (arrived) and when its batch was formed or it arrived, whichever is
// later (started; a pipeline of one camera passes when preprocessing
// began for both), inference start and end, and the result. The batch
// stage, started - arrived, is observed only by a batched pipeline, so
// the stages observed add up to the latency either way.
func (p *pipeline) observe(tCapture, tReady, tArrived, tStarted, tInfer, tInferred, tResult int64) {
	s := &p.stats
	s.results.Add(1)
	s.inferN.Add(1)
	s.inferNs.Add(tInferred - tInfer)
	p.met.latency.Observe(float64(tResult-tCapture) / 1e9)
	p.met.inference.Observe(float64(tInferred-tInfer) / 1e9)
	st := &p.met.stage
	st[stageFill].Observe(float64(tReady-tCapture) / 1e9)
	st[stageQueue].Observe(float64(tArrived-tReady) / 1e9)
	if st[stageBatch] != nil {
		st[stageBatch].Observe(float64(tStarted-tArrived) / 1e9)
	}
	st[stagePre].Observe(float64(tInfer-tStarted) / 1e9)
	st[stageInfer].Observe(float64(tInferred-tInfer) / 1e9)
	st[stagePost].Observe(float64(tResult-tInferred) / 1e9)
}

// newRegistry builds the daemon's own registry (never the process-wide
// default, so two daemons in one test process do not meet): the Go
// runtime, the process, the build, and everything of edged.
func (d *daemon) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
		d.reloadSeconds,
		daemonCollector{d},
		d.board.Collector(),
	)
	return reg
}

// slogPrinter hands promhttp's errors to the daemon's log, at most one
// line per 10 s: a scraper decides how often they happen.
type slogPrinter struct{ d *daemon }

func (p slogPrinter) Println(v ...any) {
	p.d.metricsErrs.log(p.d.log, "metrics: scrape incomplete", "err", fmt.Sprint(v...))
}

// serveMetrics serves the registry on /metrics (Prometheus text, or
// OpenMetrics or protobuf when the scraper asks for it), /livez and
// /readyz, and the live preview (/, /status.json, /preview/...: while
// daemon.preview is on), on daemon.metrics_listen ("host:port" or
// "unix:/path") until ctx is done.
func (d *daemon) serveMetrics(ctx context.Context, addr string) (func(), error) {
	network, address := "tcp", addr
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, address = "unix", p
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("metrics socket %s: %w", p, err)
		}
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		// A collector that fails leaves out its series, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slogPrinter{d},
	}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		if !d.checkHealthQuiet() {
			http.Error(w, "stalled\n", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		ready := d.ready && len(d.graph.failed) == 0
		d.mu.Unlock()
		if !ready {
			http.Error(w, "not ready\n", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	d.preview.Register(mux)
	srv := &http.Server{Handler: readOnly(mux), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics server failed", "err", err)
		}
	}()
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	return func() {
		d.preview.Close() // ends the viewers' streams, which Shutdown would wait for
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
	}, nil
}

// readOnly answers only GET and HEAD, on every path: the listener serves
// state to read, so any other method is refused with 405 and the Allow
// header (RFC 9110, section 15.5.6) before it reaches a handler.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: only GET and HEAD\n", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkHealthQuiet reports whether every loop progressed within the stall
// budget, without logging.
func (d *daemon) checkHealthQuiet() bool {
	g := d.currentGraph()
	if len(g.failed) > 0 {
		return false
	}
	limit, now := int64(g.cfg.Daemon.StallTimeout.Duration), monoNow()
	for _, p := range g.pipelines {
		if capture, infer := p.progress(now); now-capture > limit || now-infer > limit {
			return false
		}
	}
	return true
}

// The descriptions of the series the daemon's collector reads at scrape
// time. docs/OPERATIONS.md lists them; the names are edged's contract.
var (
	descBuildInfo     = prometheus.NewDesc("edged_build_info", "Build information; always 1.", []string{"version", "go", "arch"}, nil)
	descReady         = prometheus.NewDesc("edged_ready", "1 once every pipeline produced a result or waits for its source.", nil, nil)
	descGoroutines    = prometheus.NewDesc("edged_goroutines", "Goroutines in the daemon (a steady count means none leak).", nil, nil)
	descOpenFDs       = prometheus.NewDesc("edged_open_fds", "Open file descriptors (/proc/self/fd).", nil, nil)
	descMemAvailable  = prometheus.NewDesc("edged_system_memory_available_bytes", "MemAvailable from /proc/meminfo (on Jetson also the GPU's memory).", nil, nil)
	descStateWrites   = prometheus.NewDesc("edged_state_writes_total", "Last-good model copies written to the state folder, by result (error: disk full, read-only; serving goes on).", []string{"result"}, nil)
	descCaptured      = prometheus.NewDesc("edged_frames_captured_total", "Frames delivered by the source.", []string{"pipeline", "source"}, nil)
	descDropped       = prometheus.NewDesc("edged_frames_dropped_total", "Frames dropped before inference, by reason.", []string{"pipeline", "reason"}, nil)
	descResults       = prometheus.NewDesc("edged_results_total", "Results published.", []string{"pipeline"}, nil)
	descInferErrors   = prometheus.NewDesc("edged_inference_errors_total", "Failed inferences.", []string{"pipeline"}, nil)
	descPreErrors     = prometheus.NewDesc("edged_preprocess_errors_total", "Frames that failed preprocessing.", []string{"pipeline"}, nil)
	descSourceUp      = prometheus.NewDesc("edged_source_up", "1 while a camera or serial sensor delivers.", []string{"source"}, nil)
	descSourceStarts  = prometheus.NewDesc("edged_source_starts_total", "Successful source starts (1 + reconnects).", []string{"source"}, nil)
	descProgressAge   = prometheus.NewDesc("edged_pipeline_progress_age_seconds", "Time since the loop last made progress (the watchdog compares it with stall_timeout).", []string{"pipeline", "loop"}, nil)
	descEngineInfo    = prometheus.NewDesc("edged_engine_info", "The engine generation serving each pipeline; always 1.", []string{"pipeline", "model", "generation", "sha256", "backend"}, nil)
	descPoolSlots     = prometheus.NewDesc("edged_pool_slots", "Frame pool slots by state.", []string{"pipeline", "state"}, nil)
	descReloads       = prometheus.NewDesc("edged_engine_reloads_total", "Hot-reload outcomes (ok, or the rejection reason).", []string{"model", "result"}, nil)
	descChecks        = prometheus.NewDesc("edged_engine_checks_total", "Model file checks after debouncing.", []string{"model"}, nil)
	descWatchPolling  = prometheus.NewDesc("edged_engine_watch_polling", "1 while file events are unavailable and the model file is polled.", []string{"model"}, nil)
	descSensorSamples = prometheus.NewDesc("edged_sensor_samples", "Serial sensor samples kept for matching.", []string{"source"}, nil)
	descLinesRejected = prometheus.NewDesc("edged_sensor_lines_rejected_total", "Serial sensor lines or packets refused, by reason (checksum, malformed, oversize).", []string{"source", "reason"}, nil)
)

// daemonCollector reads the daemon's state when it is scraped: the
// counters the pipelines, sources, sensors, reloaders and sinks keep as
// atomics, gauges read from the system, and each running pipeline's
// histograms. Nothing of it runs on the frame path. It is an unchecked
// collector (Describe sends nothing): its series follow the running graph,
// whose pipelines, models, sources and sinks change with a reload.
type daemonCollector struct{ d *daemon }

func (daemonCollector) Describe(chan<- *prometheus.Desc) {}

// emit sends const metrics: counters, gauges and booleans (as 0 or 1).
type emit chan<- prometheus.Metric

func (e emit) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func (e emit) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (e emit) flag(d *prometheus.Desc, b bool, labels ...string) {
	v := 0.0
	if b {
		v = 1
	}
	e.gauge(d, v, labels...)
}

func (c daemonCollector) Collect(ch chan<- prometheus.Metric) {
	d, e := c.d, emit(ch)
	d.mu.Lock()
	g, ready := d.graph, d.ready
	sinks := make([]*sinkEntry, 0, len(d.sinks))
	for _, s := range d.sinks {
		sinks = append(sinks, s)
	}
	d.mu.Unlock()

	e.gauge(descBuildInfo, 1, Version, goruntime.Version(), goruntime.GOARCH)
	e.flag(descReady, ready)
	e.gauge(descGoroutines, float64(goruntime.NumGoroutine()))
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		// Less the descriptor ReadDir itself holds open.
		e.gauge(descOpenFDs, float64(len(fds)-1))
	}
	if mi, err := umem.ReadMeminfo(""); err == nil {
		e.gauge(descMemAvailable, float64(mi.MemAvailable))
	}
	if g != nil {
		c.collectGraph(e, g)
	}
	for _, s := range sinks {
		collectSink(ch, s)
	}
}

func (c daemonCollector) collectGraph(e emit, g *graph) {
	if lg := g.lastGood; lg != nil {
		e.counter(descStateWrites, lg.writes.Load(), "ok")
		e.counter(descStateWrites, lg.writeErrors.Load(), "error")
	}
	now := monoNow()
	sources := map[string]bool{} // a source's series once, should two pipelines name it
	for _, p := range g.pipelines {
		name, s := p.cfg.Name, &p.stats
		// What became of frames is read before how many were captured: a
		// frame is counted captured before it is published or dropped as
		// stale, so one scrape never shows more of those than captures
		// (read the other way round, frames captured and published between
		// the two loads did: 53 captured, 55 results under qemu).
		results, stale, corrupt := s.results.Load(), s.droppedStale.Load(), s.droppedCorrupt.Load()
		lanes := p.lanesOf() // a batched pipeline: each of its cameras
		for _, l := range lanes[1:] {
			corrupt += l.stats.droppedCorrupt.Load()
		}
		for _, l := range lanes {
			e.counter(descCaptured, l.stats.captured.Load(), name, l.scfg.Name)
		}
		e.counter(descDropped, stale, name, "stale")
		e.counter(descDropped, corrupt, name, "corrupt")
		e.counter(descResults, results, name)
		e.counter(descInferErrors, s.inferErrors.Load(), name)
		e.counter(descPreErrors, s.preErrors.Load(), name)
		capture, infer := p.progress(now)
		e.gauge(descProgressAge, float64(now-infer)/1e9, name, "inference")
		e.gauge(descProgressAge, float64(now-capture)/1e9, name, "capture")
		if p.met.latency != nil {
			p.met.latency.Collect(e)
			p.met.inference.Collect(e)
			p.met.stages.Collect(e)
		}
		if gen := p.hot.Current(); gen != nil {
			e.gauge(descEngineInfo, 1, name, gen.Model, fmt.Sprint(gen.Number), gen.SHAPrefix(), gen.Engine.Backend())
		}
		var slots umem.PoolStats // the cameras' pools together
		pooled := false
		for _, l := range lanes {
			if pool := l.framePool(); pool != nil {
				pooled = true
				for i, n := range pool.Stats().State {
					slots.State[i] += n
				}
			}
		}
		if pooled {
			for i, n := range slots.State {
				e.gauge(descPoolSlots, float64(n), name, umem.SlotState(i).String())
			}
		}
		for _, l := range lanes {
			collectCamera(e, l, sources)
		}
	}
	for name, md := range g.models {
		r, ok := md.watch.(*reload.Reloader)
		if !ok {
			continue
		}
		st := r.Stats()
		e.counter(descReloads, st.Reloaded, name, "ok")
		for reason, n := range st.RejectedBy {
			e.counter(descReloads, n, name, reason)
		}
		e.counter(descChecks, st.Checks, name)
		e.flag(descWatchPolling, st.Polling, name)
	}
	for name, se := range g.sensors {
		if sources[name] {
			continue
		}
		e.flag(descSourceUp, se.up.Load(), name)
		e.gauge(descSensorSamples, float64(se.ring.Len()), name)
		if rs, ok := se.src.(interface{ RejectedLines() map[string]uint64 }); ok {
			for reason, n := range rs.RejectedLines() {
				e.counter(descLinesRejected, n, name, reason)
			}
		}
	}
}

// collectCamera sends the series of the camera of pipeline (or lane) p,
// once per source name.
func collectCamera(e emit, p *pipeline, sources map[string]bool) {
	if sources[p.scfg.Name] {
		return
	}
	sources[p.scfg.Name] = true
	e.flag(descSourceUp, p.sourceUp.Load(), p.scfg.Name)
	e.counter(descSourceStarts, p.stats.reconnects.Load(), p.scfg.Name)
	if c, ok := p.src.(interface{ Collector() prometheus.Collector }); ok {
		c.Collector().Collect(e) // the source kind's own series
	}
}

// collectSink sends a sink's series: its kind's own collector's, labelled
// with its name (each kind knows its series; the daemon names none).
func collectSink(ch chan<- prometheus.Metric, s *sinkEntry) {
	if c, ok := s.sink.(interface{ Collector() prometheus.Collector }); ok {
		c.Collector().Collect(ch)
	}
}
