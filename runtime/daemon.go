package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edged-dev/edged/runtime/board"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preview"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/umem"
)

// Version is stamped at build time with -ldflags -X.
var Version = "dev"

// Options configure a daemon.
type Options struct {
	Config    *config.Config
	Factories Factories
	Logger    *slog.Logger
	// Notifier receives sd_notify states; nil sends nothing.
	Notifier Notifier
	// Listeners are socket-activated listeners by file descriptor name.
	Listeners map[string]net.Listener
	// WatchdogInterval is $WATCHDOG_USEC; 0 disables the pings.
	WatchdogInterval time.Duration
}

// Daemon runs pipelines from one configuration until stopped.
type Daemon struct{ d *daemon }

type daemon struct {
	opts   Options
	cfg    *config.Config
	log    *slog.Logger
	notify notifier
	// device is the device id written into every record; chosen once in
	// New (daemon.device_id needs a restart to change).
	device string

	reloadReq chan reloadRequest
	engineReq chan struct{}
	fatalErr  chan error // an unrecoverable failure: stop and exit 1

	// reg is the daemon's metrics registry (metrics.go), served on
	// /metrics; reloadSeconds times reload transactions by model and result.
	reg           *prometheus.Registry
	reloadSeconds *prometheus.HistogramVec
	metricsErrs   rateLog // scrapes that could not gather everything

	// structMu serialises what replaces parts of the running graph: a
	// reload's commit (and its restore) and stop. A reload prepares its
	// graph without it (loading engines may take long), then takes it.
	structMu sync.Mutex

	// board reads the board's health every few seconds (boardhealth.go),
	// from run until stop; sysfs, procfs and rootfs are chosen once.
	board *board.Monitor

	// preview holds the live preview's taps, one per pipeline and camera,
	// across reloads, and serves them on the metrics listener
	// (previewpage.go); latency keeps its page's latency windows.
	preview *preview.Hub
	latency latencyWindows

	// mu protects the fields below. They are written only by the run
	// goroutine and the reload it runs (start, SIGHUP reloads, stop, one
	// at a time), which may read them without it; every other reader
	// (publishers, /metrics, health) takes it.
	mu        sync.Mutex
	alloc     umem.Allocator
	sinks     map[string]*sinkEntry
	graph     *graph
	ready     bool
	stalled   map[string]bool
	reloading *reloadProgress // a SIGHUP reload in progress (reloading.go), nil otherwise
}

type reloadRequest struct {
	cfg  *config.Config
	done chan error
}

type sinkEntry struct {
	cfg config.Sink
	// files identifies the content of the files the sink was built from
	// (config.SinkFiles): a reload that changes them replaces the sink.
	files string
	// at is what the sink holds that another sink cannot hold at the same
	// time (sinkHolds): built from the same configuration, a sink with
	// the same at must wait until this one is stopped.
	at     string
	sink   Sink
	cancel context.CancelFunc
	done   chan struct{}
}

// New checks the options; nothing is started until Run.
func New(opts Options) (*Daemon, error) {
	if opts.Config == nil {
		return nil, errors.New("runtime: no configuration")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	id, from := DeviceID(opts.Config.Daemon.DeviceID)
	opts.Config.Daemon.DeviceID = id
	opts.Logger.Info("device id", "device", id, "from", from)
	d := &daemon{
		device:    id,
		opts:      opts,
		cfg:       opts.Config,
		log:       opts.Logger,
		notify:    notifier{n: opts.Notifier},
		reloadReq: make(chan reloadRequest),
		engineReq: make(chan struct{}, 1),
		fatalErr:  make(chan error, 1),
		sinks:     map[string]*sinkEntry{},
		stalled:   map[string]bool{},
	}
	d.graph = newGraph(d, opts.Config) // never nil: empty until Run builds it
	d.board = d.newBoardMonitor()
	d.preview = d.newPreview()
	d.reloadSeconds = prometheus.NewHistogramVec(histogramOpts("edged_engine_reload_seconds",
		"Hot-reload transactions that staged an engine, from reading the file to the outcome, by model and result (ok, or the rejection reason).",
		reloadBuckets, nil), []string{"model", "result"})
	d.reg = d.newRegistry()
	return &Daemon{d}, nil
}

// Run starts everything the configuration describes and serves until ctx
// is done, then stops within the configured budget. It returns nil after a
// clean stop; start-up failures wrap config.ErrInvalid when the configuration is at
// fault.
func (dd *Daemon) Run(ctx context.Context) error { return dd.d.run(ctx) }

// Reload replaces the configuration (SIGHUP) as a transaction: what did not
// change keeps running, what changed is prepared beside it and replaces it
// only once ready (see reconfig). An invalid configuration was already
// rejected by the loader; if the new one fails, the running one is kept or
// restored and the error returned.
func (dd *Daemon) Reload(ctx context.Context, cfg *config.Config) error {
	req := reloadRequest{cfg: cfg, done: make(chan error, 1)}
	select {
	case dd.d.reloadReq <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ConfigRejected tells every sink that a new configuration file was
// rejected (the running one stays), with the problems found.
func (dd *Daemon) ConfigRejected(file string, err error) {
	dd.d.publishConfigStatus("config_rejected", file, err.Error())
}

// ReloadEngines asks every model to check its file now.
func (dd *Daemon) ReloadEngines() { dd.d.triggerEngines() }

// fatal stops the daemon with err (exit status 1); the first call wins.
func (d *daemon) fatal(err error) {
	select {
	case d.fatalErr <- err:
	default:
	}
}

func (d *daemon) triggerEngines() {
	select {
	case d.engineReq <- struct{}{}:
	default:
	}
}

func (d *daemon) run(ctx context.Context) error {
	alloc, why, err := d.opts.Factories.Allocator(d.cfg.GPU)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	d.alloc = alloc
	d.log.Info("memory strategy", "strategy", string(alloc.Strategy()), "why", why)
	d.notify.status("starting: %d pipeline(s)", len(d.cfg.Pipelines))
	if addr := d.cfg.Daemon.MetricsListen; addr != "" {
		stopMetrics, err := d.serveMetrics(ctx, addr)
		if err != nil {
			// The address was validated with the configuration: what is
			// left (in use, an address not up yet) may go away, so this is
			// a runtime failure (exit 1, retried), not config.ErrInvalid (78).
			return fmt.Errorf("daemon.metrics_listen: %w", err)
		}
		defer stopMetrics()
	}

	if err := d.startSinks(d.cfg, nil); err != nil {
		d.stopSinks(time.Now().Add(d.cfg.Daemon.StopTimeout.Duration))
		return err
	}
	d.board.Start() // after the sinks: a board already hot at start is announced
	defer d.board.Close()
	if err := d.startOrStop(ctx); err != nil {
		d.stopSinks(time.Now().Add(d.cfg.Daemon.StopTimeout.Duration))
		return err
	}
	if ctx.Err() != nil {
		return d.stop() // asked to stop while starting: a clean stop
	}
	d.refreshStatus()

	wd := d.opts.WatchdogInterval
	tick := time.Second
	if wd > 0 {
		tick = min(tick, wd/2)
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	lastStatus := time.Now()
	// This loop feeds the watchdog, so nothing that can take long runs on
	// it: a reload (engine loads, sinks started and stopped) runs on a
	// goroutine of its own, one at a time (reloading.go), while the loop
	// goes on judging the pipelines' progress.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var cur *reloadRun
	reqs := d.reloadReq
	for {
		var reloaded chan error
		if cur != nil {
			reloaded = cur.done
		}
		select {
		case <-ctx.Done():
			d.awaitReload(cur, rcancel)
			return d.stop()
		case err := <-d.fatalErr:
			d.log.Error("unrecoverable failure; stopping", "err", err)
			d.notify.status("FAILED: %v", err)
			d.awaitReload(cur, rcancel)
			d.stop()
			return err
		case req := <-reqs:
			cur, reqs = d.startReload(rctx, req), nil // later requests wait for this one
		case err := <-reloaded:
			cur.req.done <- err
			cur, reqs = nil, d.reloadReq
		case <-d.engineReq:
			d.currentGraph().triggerEngines()
		case <-ticker.C:
			healthy := d.checkHealth()
			if wd > 0 && healthy {
				d.notify.send("WATCHDOG=1")
			}
			d.checkRates()
			cur.warnIfSlow(d)
			if time.Since(lastStatus) >= 5*time.Second {
				lastStatus = time.Now()
				d.refreshStatus()
			}
		}
	}
}

// startOrStop builds and starts the first graph. A stop asked for while it
// runs (ctx done) is not a failure, whatever start was doing: it returns
// nil once start has given up, or after the stop budget when start cannot
// be interrupted (a model load or warm-up inside a library call; start
// then frees what it built when that call returns, and starts nothing).
// Otherwise it returns start's error.
func (d *daemon) startOrStop(ctx context.Context) error {
	// Read before start runs: start publishes its graph and config (setGraph)
	// from its own goroutine, so d.cfg is not the run goroutine's alone here.
	cfg := d.cfg
	budget := cfg.Daemon.StopTimeout.Duration
	started := make(chan error, 1)
	go func() { started <- d.start(ctx, cfg) }()
	var err error
	select {
	case err = <-started:
	case <-ctx.Done():
		select {
		case err = <-started:
		case <-time.After(budget):
			d.log.Warn("stop asked for during start-up; start-up cannot be interrupted now (a model load or warm-up in progress) and is left behind",
				"waited", budget.String())
			return nil
		}
	}
	if err != nil && ctx.Err() != nil {
		d.log.Info("stop asked for during start-up; start-up abandoned", "at", err.Error())
		return nil
	}
	return err
}

// stop stops pipelines (finishing the frame in flight), then sinks (which
// flush what was published), all within the stop budget.
func (d *daemon) stop() error {
	d.structMu.Lock()
	defer d.structMu.Unlock()
	budget := d.currentGraph().cfg.Daemon.StopTimeout.Duration
	deadline := time.Now().Add(budget)
	d.notify.send("STOPPING=1")
	d.notify.status("stopping")
	d.publishStatus("stopping", "", "", "")
	d.log.Info("stopping", "budget", budget.String())
	g := d.currentGraph()
	d.setGraph(newGraph(d, g.cfg), false)
	d.release(g, d.currentGraph(), deadline) // logs what did not stop in time
	d.board.Close()
	var errs []error
	if err := d.stopSinks(deadline); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		d.log.Warn("stop budget exceeded; exiting anyway", "err", err)
	}
	d.log.Info("stopped")
	return nil
}

// reload runs on a goroutine of its own (startReload), never on the run
// loop: loading engines may take long, and the loop feeds the watchdog.
func (d *daemon) reload(ctx context.Context, cfg *config.Config) error {
	d.notify.send("RELOADING=1", monotonicUsec())
	d.beginReload()
	defer func() {
		// The reload is over (RELOADING=1 needs its READY=1), whatever
		// came of it: when a pipeline could not be restored, STATUS= says
		// so and the watchdog pings stay withheld. Not when edged is
		// stopping: it said STOPPING=1.
		d.endReload()
		if ctx.Err() == nil {
			d.notify.send("READY=1")
			d.refreshStatus()
		}
	}()
	if cfg.Daemon.DeviceID != "" && cfg.Daemon.DeviceID != d.device {
		d.log.Warn("daemon.device_id changed; the device id keeps until edged restarts", "running", d.device, "configured", cfg.Daemon.DeviceID)
	}
	cfg.Daemon.DeviceID = d.device
	base := d.currentGraph()
	if config.Equal(base.cfg, cfg) && len(base.failed) == 0 {
		d.log.Info("configuration unchanged; re-checking engine files")
		d.triggerEngines()
		return nil
	}
	old := base.cfg
	if old.Daemon.MetricsListen != cfg.Daemon.MetricsListen {
		d.log.Warn("daemon.metrics_listen changed; the metrics server keeps its address until edged restarts",
			"running", old.Daemon.MetricsListen, "configured", cfg.Daemon.MetricsListen)
	}
	if o, n := old.Daemon, cfg.Daemon; o.Sysfs != n.Sysfs || o.Procfs != n.Procfs || o.Rootfs != n.Rootfs {
		d.log.Warn("daemon.sysfs, procfs or rootfs changed; the board is read where it was until edged restarts", "reading", d.board.Paths())
	}
	if o, n := old.GPU, cfg.GPU; o.Device != n.Device || o.Memory != n.Memory || o.Strict != n.Strict {
		d.log.Warn("gpu.device, gpu.memory or gpu.strict changed; the device and memory strategy are chosen once and keep until edged restarts")
	}
	if err := d.reconfigure(ctx, cfg); err != nil {
		d.publishConfigStatus("config_rejected", cfg.File, err.Error())
		return err
	}
	d.configurePreview(old, cfg)
	// Model files are named by the configuration too: the watchers of the
	// models that carried over check theirs now, as for an unchanged one.
	d.triggerEngines()
	d.log.Info("configuration reloaded", "file", cfg.File)
	d.publishConfigStatus("config_reloaded", cfg.File, "")
	return nil
}

// startSinks starts the sinks of c, keeping running sinks whose
// configuration did not change (their clients stay connected) and stopping
// sinks that are gone or changed. early holds the sinks of c already built
// while the running ones served (buildEarlySinks); they are put in place
// first, then the others are built, each after the sink it replaces
// stopped.
func (d *daemon) startSinks(c *config.Config, early map[string]*sinkEntry) error {
	keep := d.keptSinks(c)
	deadline := time.Now().Add(c.Daemon.StopTimeout.Duration)
	for name, e := range d.sinks {
		if !keep[name] {
			d.stopSink(e, deadline)
			d.mu.Lock()
			delete(d.sinks, name)
			d.mu.Unlock()
		}
	}
	for name, e := range early {
		d.runSink(e)
		delete(early, name)
	}
	for i := range c.Sinks {
		sc := c.Sinks[i]
		if keep[sc.Name] || d.sinks[sc.Name] != nil {
			continue
		}
		e, err := d.buildSink(c, &sc)
		if err != nil {
			return err
		}
		d.runSink(e)
	}
	return nil
}

// inherited picks the socket-activated listener for a socket sink: the one
// whose FileDescriptorName is the sink's name, or the only one when there is
// exactly one listener and one socket sink.
func (d *daemon) inherited(c *config.Config, s *config.Sink) net.Listener {
	names := make([]string, 0, len(d.opts.Listeners))
	for n := range d.opts.Listeners {
		names = append(names, n)
	}
	if n, ok := InheritedName(c, s, names); ok {
		return d.opts.Listeners[n]
	}
	return nil
}

// InheritedName says which of the socket-activated listeners named names
// (FileDescriptorName=) a socket sink takes: the one with the sink's name,
// or the only one when there is exactly one listener and one socket sink.
// run binds listeners by it, and check tells by it whether a systemd
// socket unit would hand a sink its socket.
func InheritedName(c *config.Config, s *config.Sink, names []string) (string, bool) {
	if !s.Listens() || len(names) == 0 {
		return "", false
	}
	if slices.Contains(names, s.Name) {
		return s.Name, true
	}
	sockets := 0
	for _, x := range c.Sinks {
		if x.Listens() {
			sockets++
		}
	}
	if sockets == 1 && len(names) == 1 {
		return names[0], true
	}
	return "", false
}

func (d *daemon) control(ctx context.Context, req string) error {
	switch req {
	case "reload", "engines":
		// Not logged here: the sink logs requests with the peer, at a
		// bounded rate (a client decides how often this runs).
		d.triggerEngines()
		return nil
	}
	return fmt.Errorf("unknown request %q", req)
}

func (d *daemon) stopSink(e *sinkEntry, deadline time.Time) error {
	e.cancel()
	var err error
	select {
	case <-e.done:
	case <-time.After(time.Until(deadline)):
		err = fmt.Errorf("sink %q did not stop in time", e.cfg.Name)
	}
	if cerr := e.sink.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("sink %q: %w", e.cfg.Name, cerr)
	}
	return err
}

func (d *daemon) stopSinks(deadline time.Time) error {
	var errs []error
	for name, e := range d.sinks {
		errs = append(errs, d.stopSink(e, deadline))
		d.mu.Lock()
		delete(d.sinks, name)
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

// publishStatus sends a status event to every sink.
func (d *daemon) publishStatus(event, pipeline, source, reason string) {
	d.publish(&stream.Record{Kind: stream.KindStatus, Event: event, Pipeline: pipeline, Source: source, Reason: reason, TNs: monoNow()})
}

// publishEngineStatus sends a hot-reload event, naming the engine
// generation now serving and the content examined.
func (d *daemon) publishEngineStatus(event string, ev reload.Event, reason string) {
	e := stream.EngineRef{Name: ev.Model, Generation: ev.Generation, SHA256: ev.SHAPrefix()}
	if ev.Serving != ev.SHA256 && ev.Generation > 0 && ev.Outcome != reload.OutcomeReloaded {
		e.Serving = ev.ServingPrefix() // the file examined is not what serves
	}
	d.publish(&stream.Record{Kind: stream.KindStatus, Event: event, Pipeline: ev.Target, Source: ev.Model, Model: ev.Model, Reason: reason, TNs: monoNow(), Engine: e})
}

// publishSinkStatus sends a sink's state change (sink_up, sink_down, ...)
// to every sink; source repeats the sink for clients of earlier records.
func (d *daemon) publishSinkStatus(event, sink, reason string) {
	d.publish(&stream.Record{Kind: stream.KindStatus, Event: event, Source: sink, Sink: sink, Reason: reason, TNs: monoNow()})
}

// publishConfigStatus sends config_reloaded or config_rejected; source
// repeats the file for clients of earlier records.
func (d *daemon) publishConfigStatus(event, file, reason string) {
	d.publish(&stream.Record{Kind: stream.KindStatus, Event: event, Source: file, File: file, Reason: reason, TNs: monoNow()})
}

func (d *daemon) publish(rec *stream.Record) {
	rec.Device = d.device
	d.mu.Lock()
	sinks := make([]Sink, 0, len(d.sinks))
	for _, e := range d.sinks {
		sinks = append(sinks, e.sink)
	}
	d.mu.Unlock()
	for _, s := range sinks {
		s.Publish(rec)
	}
}

// checkHealth reports whether every loop made progress within the stall
// budget; a wedged pipeline withholds the watchdog pings.
// A pipeline that could not be started (failed) withholds them too: the
// daemon cannot do what its configuration says, and a restart is the way
// back.
func (d *daemon) checkHealth() bool {
	g := d.currentGraph()
	limit := int64(g.cfg.Daemon.StallTimeout.Duration)
	now := monoNow()
	healthy := len(g.failed) == 0
	for _, p := range g.pipelines {
		capture, infer := p.progress(now)
		for _, st := range []struct {
			loop  string
			stamp int64
		}{{"capture", capture}, {"inference", infer}} {
			key := p.cfg.Name + "/" + st.loop
			stalled := now-st.stamp > limit
			if stalled {
				healthy = false
			}
			d.mu.Lock()
			was := d.stalled[key]
			d.stalled[key] = stalled
			d.mu.Unlock()
			switch {
			case stalled && !was:
				d.log.Error("pipeline stalled; withholding watchdog pings", "pipeline", p.cfg.Name, "loop", st.loop,
					"no_progress_for", time.Duration(now-st.stamp).Round(time.Millisecond).String())
				d.notify.status("STALLED: pipeline %s %s loop made no progress for %s", p.cfg.Name, st.loop, time.Duration(now-st.stamp).Round(time.Second))
			case !stalled && was:
				d.log.Info("pipeline progressing again", "pipeline", p.cfg.Name, "loop", st.loop)
			}
		}
	}
	return healthy
}

// refreshStatus sends READY=1 once every pipeline is running or waiting
// for its source, and a STATUS= line a person can read.
func (d *daemon) refreshStatus() {
	g := d.currentGraph()
	if line, ok := d.reloadStatus(g); ok {
		d.notify.status("%s", line) // never READY=1: the reload sends it when it is over
		return
	}
	if g.transitional {
		return // parts are being replaced; reload says so
	}
	if len(g.failed) > 0 {
		d.notify.status("%s", failedStatus(g))
		return
	}
	if len(g.pipelines) == 0 {
		return // not built yet
	}
	parts, allSettled := pipelineParts(g)
	d.mu.Lock()
	first := allSettled && !d.ready
	if first {
		d.ready = true
	}
	d.mu.Unlock()
	line := strings.Join(parts, "; ")
	if b := d.boardStatus(); b != "" {
		line += "; " + b
	}
	if first {
		d.log.Info("ready", "pipelines", len(g.pipelines), "status", line)
		d.notify.ready("ready: " + line)
		return
	}
	d.notify.status("%s", line)
}

// pipelineParts is what each pipeline of g is doing, for STATUS= (sorted),
// and whether every one is running or waiting for its source.
func pipelineParts(g *graph) (parts []string, allSettled bool) {
	allSettled = true
	for _, p := range g.pipelines {
		st := pipelineState(p.state.Load())
		switch st {
		case stateStarting:
			allSettled = false
			parts = append(parts, fmt.Sprintf("%s starting", p.cfg.Name))
		case stateWaiting:
			waiting := p.scfg.Name
			if p.bat != nil {
				waiting = "its cameras"
			}
			parts = append(parts, fmt.Sprintf("%s waiting for %s%s", p.cfg.Name, waiting, p.sourceNote()))
		case stateRunning:
			gen := p.hot.Current()
			info := ""
			if gen != nil {
				info = fmt.Sprintf(" model %s gen %d %s", gen.Model, gen.Number, gen.SHAPrefix())
			}
			if t := p.throttledStatus(); t != "" {
				// The correlation: "p: 18 of 30 fps, gpu-thermal throttling at 98.5 °C".
				if info != "" {
					info = "," + info
				}
				parts = append(parts, fmt.Sprintf("%s: %s%s%s", p.cfg.Name, t, info, p.slowStatus()))
			} else if fps := p.fps(); fps > 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f fps%s%s%s", p.cfg.Name, fps, info, p.slowStatus(), p.sourceNote()))
			} else {
				parts = append(parts, fmt.Sprintf("%s producing results%s%s%s", p.cfg.Name, info, p.slowStatus(), p.sourceNote()))
			}
		}
	}
	sort.Strings(parts)
	return parts, allSettled
}

// sourceNote is what the source says of itself for STATUS= (a network
// camera: its transport and the pictures it dropped after losses), as
// ", note", or "".
func (p *pipeline) sourceNote() string {
	note := ""
	for _, l := range p.lanesOf() {
		if n, ok := l.src.(interface{ StatusNote() string }); ok {
			if s := n.StatusNote(); s != "" {
				if p.bat != nil {
					s = l.scfg.Name + ": " + s
				}
				note += ", " + s
			}
		}
	}
	return note + p.camerasDown()
}

// failedStatus is the STATUS= line of a graph with failed pipelines.
func failedStatus(g *graph) string {
	var failed, running []string
	for name, f := range g.failed {
		failed = append(failed, fmt.Sprintf("pipeline %s cannot run (%v)", name, f.err))
	}
	for _, p := range g.pipelines {
		running = append(running, p.cfg.Name)
	}
	sort.Strings(failed)
	sort.Strings(running)
	line := "FAILED: " + strings.Join(failed, "; ")
	if len(running) > 0 {
		line += "; still running: " + strings.Join(running, ", ")
	}
	return line + "; watchdog pings withheld so that systemd restarts edged (SIGHUP retries)"
}

// same reports whether the running sink e is what sink s of c describes:
// the same table, and files (password, TLS) with the same content.
func (e *sinkEntry) same(c *config.Config, s *config.Sink) bool {
	ta, ea := config.Encode(&config.Config{Sinks: []config.Sink{e.cfg}})
	tb, eb := config.Encode(&config.Config{Sinks: []config.Sink{*s}})
	return ea == nil && eb == nil && ta == tb && e.files == c.SinkFiles(s)
}
