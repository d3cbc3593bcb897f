package runtime

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/internal/regfile"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preview"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/umem"
)

// graph is everything built from one configuration except the sinks:
// sensor sources, models and pipelines. A configuration reload builds the
// next graph from the running one (reconfigure.go): every part whose
// configuration did not change is moved into it as it is, still running,
// and each part owns its goroutines, so it can be stopped alone.
type graph struct {
	d         *daemon
	cfg       *config.Config
	pipelines []*pipeline // running
	// failed holds the pipelines of cfg that could not be started (only
	// after a reload whose new configuration failed and whose previous
	// one could not be fully restored). While it is not empty the daemon
	// is unhealthy: no watchdog pings, /readyz and /livez fail.
	failed   map[string]*failedPipeline
	sensors  map[string]*sensorEntry
	models   map[string]*model
	lastGood *lastGood // nil when there is no state_dir
	// transitional marks the graph published while a reload replaces
	// parts: it holds what keeps running and announces nothing.
	transitional bool
}

type failedPipeline struct {
	p   *pipeline // not running; its Hot keeps the engine for the next attempt
	err error
}

func newGraph(d *daemon, c *config.Config) *graph {
	return &graph{d: d, cfg: c, failed: map[string]*failedPipeline{}, sensors: map[string]*sensorEntry{}, models: map[string]*model{}}
}

type sensorEntry struct {
	cfg  *config.Source
	key  string // configKey of cfg: an unchanged sensor keeps running across a reload
	src  sensors.SampleSource
	ring *sensors.Ring
	up   atomic.Bool // written by the sensor's goroutine, read by /metrics

	cancel  context.CancelFunc // nil until started
	done    chan struct{}
	stopped bool
}

func (e *sensorEntry) running() bool { return e.cancel != nil && !e.stopped }

// model is one [[model]] and the pipelines (targets) using it.
type model struct {
	cfg     *config.Model
	key     string // modelKey: a model whose key is unchanged is kept as it is across a reload
	bkey    string // backendKey: its backend may be reused when unchanged
	path    string // resolved; "" for built-in models
	backend trt.Backend
	targets []*pipeline // at load time
	watch   modelWatcher
	started bool // watch started
	// maxBytes is daemon.max_model_bytes.
	maxBytes int64
}

// modelWatcher re-checks a model file (hot reload); nil when reload is off.
type modelWatcher interface {
	Trigger()
	Close() error
}

// pipelineLife is what the graph keeps of a pipeline besides what it
// runs: the keys that decide what a configuration reload may keep, and
// the pipeline's two goroutines.
type pipelineLife struct {
	key    string // pipelineKey: an unchanged pipeline keeps running across a reload
	engine string // engineKey: its engine may carry over when unchanged
	model  string // where its engine came from (resolved file or builtin:name)

	cancel  context.CancelFunc // nil until started
	done    chan struct{}
	stopped bool
}

func (p *pipeline) running() bool { return p.life.cancel != nil && !p.life.stopped }

// isAbsent reports whether a start error means the device is not there
// (as opposed to being there and failing).
func isAbsent(err error) bool {
	return errors.Is(err, sensors.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, sensors.ErrDeviceGone)
}

// newPipeline builds a pipeline of g (not started) around hot.
func (g *graph) newPipeline(pc *config.Pipeline, hot *trt.Hot) *pipeline {
	c := g.cfg
	if hot == nil {
		hot = &trt.Hot{}
	}
	cams := pc.Cameras()
	p := g.newLane(pc, cams[0], hot)
	if pc.Batched() {
		p.bat = &batchGroup{lanes: []*pipeline{p}}
		for _, name := range cams[1:] {
			l := g.newLane(pc, name, hot)
			l.bat = p.bat
			p.bat.lanes = append(p.bat.lanes, l)
		}
	}
	p.life.key = pipelineKey(c, pc)
	p.life.engine = engineKey(c, pc)
	p.life.model = modelPath(c, c.Model(pc.Model))
	for _, name := range pc.Sensors {
		p.rings = append(p.rings, g.sensors[name].ring)
	}
	return p
}

// newLane builds the part of pipeline pc that camera src feeds: the
// pipeline itself, or one lane of a batched pipeline.
func (g *graph) newLane(pc *config.Pipeline, src string, hot *trt.Hot) *pipeline {
	d, c := g.d, g.cfg
	p := &pipeline{host: d, newGPU: d.opts.Factories.GPUPreprocess, stall: c.Daemon.StallTimeout.Duration, conf: c, cfg: pc, scfg: c.Source(src),
		log: d.log.With("pipeline", pc.Name), hot: hot, mb: newMailbox(pc.Schedule == "latest", pc.Queue)}
	p.frameAlloc = func() (umem.Allocator, error) { return d.frameAllocator(p) }
	if d.preview != nil {
		p.tap = d.preview.Tap(preview.Key{Pipeline: pc.Name, Source: src})
		p.previewMatrix = preview.Matrix{BT709: pc.Preprocess.ColorMatrix == "bt709", FullRange: pc.Preprocess.ColorRange == "full"}
	}
	return p
}

// poolSlots is how many frame slots a pipeline's pool has: the device's
// buffers, one in the mailbox (or the queue), one being preprocessed, one
// spare so capture never waits on inference.
func poolSlots(sc *config.Source, pc *config.Pipeline) int {
	depth := 1
	if pc.Schedule == "queue" {
		depth = pc.Queue
	}
	return sc.Buffers + 2 + depth
}

// SlotSize is the frame slot size a source needs: what the source says
// (V4L2 strides, replay headers) or else what its configured format takes.
// src may be nil.
func SlotSize(src sensors.Source, sc *config.Source) int {
	if h, ok := src.(interface{ SlotSize() int }); ok && h.SlotSize() > 0 {
		return h.SlotSize()
	}
	return frameSize(sc)
}

// startPipeline allocates the pipeline's frame pool, starts its source and
// its two goroutines (a batched pipeline: each camera's pool and source, a
// capture goroutine per camera and the inference goroutine). An optional
// source that is absent is waited for by the capture loop. On error
// nothing of it runs.
func (d *daemon) startPipeline(p *pipeline) (err error) {
	pc := p.cfg
	p.sinks = p.sinks[:0]
	for _, name := range pc.Sinks {
		e := d.sinks[name]
		if e == nil {
			return fmt.Errorf("pipeline %q: sink %q is not running", pc.Name, name)
		}
		p.sinks = append(p.sinks, e.sink)
	}
	lanes := p.lanesOf()
	for _, l := range lanes {
		if l.src == nil {
			return fmt.Errorf("pipeline %q: no source built for %q", pc.Name, l.scfg.Name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			cancel()
			for _, l := range lanes {
				l.src.Close()
				if l.pool != nil {
					l.pool.Close()
					l.pool = nil
				}
			}
			if p.bat != nil && p.bat.b != nil {
				p.bat.b.Close()
				p.bat.b = nil
			}
		}
	}()
	if p.bat != nil {
		if err := p.newBatcher(); err != nil {
			return err
		}
	}
	for _, l := range lanes {
		if err := d.startLane(ctx, l); err != nil {
			return err
		}
	}
	p.life.cancel, p.life.done = cancel, make(chan struct{})
	p.started = monoNow()
	p.stampInfer()
	done := make(chan struct{}, len(lanes)+1)
	for _, l := range lanes {
		l.started = p.started
		l.stampCapture()
		go func() { defer func() { done <- struct{}{} }(); l.capture(ctx) }()
	}
	infer := p.infer
	if p.bat != nil {
		infer = p.inferBatches
	}
	go func() { defer func() { done <- struct{}{} }(); infer(ctx) }()
	go func() {
		for range len(lanes) + 1 {
			<-done
		}
		close(p.life.done)
	}()
	return nil
}

// startLane allocates the frame pool of a pipeline's camera (the
// pipeline, or one lane of a batched pipeline) and starts its source. An
// optional source that is absent is waited for by its capture loop.
func (d *daemon) startLane(ctx context.Context, p *pipeline) (err error) {
	sc, pc := p.scfg, p.cfg
	slots, size := poolSlots(sc, pc), SlotSize(p.src, sc)
	if _, err = p.frames(); err != nil {
		return err
	}
	if p.pool, err = umem.NewPool(p.alloc, slots, size); err != nil {
		return fmt.Errorf("pipeline %q: frame pool of %d × %d bytes: %w", pc.Name, slots, size, err)
	}
	if err := p.src.Start(ctx, poolAdapter{p.pool}); err != nil {
		if !sc.Optional || !isAbsent(err) {
			return fmt.Errorf("source %q: %w", sc.Name, err)
		}
		p.log.Info("optional source absent; waiting for it", "source", sc.Name, "device", sc.Device, "err", err)
		p.state.Store(int32(stateWaiting))
		p.setDownWhy(err)
		return nil
	}
	p.sourceUpEvent(p.rs.started())
	h := p.head()
	p.log.Info("pipeline started", "source", sc.Name, "format", p.src.Format().String(), "model", pc.Model,
		"input", fmt.Sprintf("%dx%dx%d", h.c, h.h, h.w), "schedule", pc.Schedule)
	p.logDecoder()
	return nil
}

// stopPipeline stops the pipeline's goroutines and source (finishing the
// frame in flight) and frees its frame pool. Its engine stays: the Hot is
// closed by whoever owns it last. stopPipeline is idempotent.
func (d *daemon) stopPipeline(p *pipeline, deadline time.Time) error {
	if p.life.stopped {
		return nil
	}
	p.life.stopped = true
	lanes := p.lanesOf()
	if p.life.cancel == nil { // built, never started
		p.closeSources()
		p.closePreprocessors()
		return nil
	}
	p.life.cancel()
	p.closeSources() // a Next blocked in a device wakes up
	var err error
	select {
	case <-p.life.done:
	case <-time.After(time.Until(deadline)):
		err = fmt.Errorf("pipeline %q did not stop within the stop budget", p.cfg.Name)
	}
	p.mb.drain()
	if err == nil {
		if p.bat != nil && p.bat.b != nil {
			p.bat.b.Close() // releases the frames waiting for a batch
		}
		p.closePreprocessors()
		for _, l := range lanes {
			if l.pool != nil {
				l.pool.Close()
			}
		}
	}
	return err
}

// closeSources closes the source of each of the pipeline's cameras.
func (p *pipeline) closeSources() {
	for _, l := range p.lanesOf() {
		if l.src != nil {
			l.src.Close()
		}
	}
}

// startSensor starts a serial sensor and its supervising goroutine. A
// sensor that is absent is waited for when it is optional, or when must
// is false (restoring a configuration: the goroutine keeps retrying).
func (d *daemon) startSensor(e *sensorEntry, must bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.src.Start(ctx); err != nil {
		if must && (!e.cfg.Optional || !isAbsent(err)) {
			cancel()
			e.src.Close()
			return fmt.Errorf("sensor %q (%s): %w", e.cfg.Name, e.cfg.Device, err)
		}
		d.log.Info("sensor absent; waiting for it", "source", e.cfg.Name, "device", e.cfg.Device, "err", err)
	} else {
		e.up.Store(true)
	}
	e.cancel, e.done = cancel, make(chan struct{})
	go func() { defer close(e.done); d.runSensor(ctx, e) }()
	return nil
}

func (d *daemon) stopSensor(e *sensorEntry, deadline time.Time) error {
	if e.stopped {
		return nil
	}
	e.stopped = true
	e.src.Close()
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	select {
	case <-e.done:
		return nil
	case <-time.After(time.Until(deadline)):
		return fmt.Errorf("sensor %q did not stop within the stop budget", e.cfg.Name)
	}
}

// loadFile loads a model file for the targets whose Hot is empty (fresh)
// and leaves a Reloader watching the file for all of them (started later,
// by commit). Targets whose Hot already serves an engine carried over from
// the running graph are not loaded again: the Reloader, once started,
// treats the file's content as it treats any change, so an unchanged file
// costs nothing and a broken one is rejected while the engine in memory
// keeps serving.
//
// At start, when the file cannot be used and a copy of the last good one
// was kept in the state folder, that copy serves instead (and the file
// keeps being watched), so a power cut in the middle of replacing an
// engine does not keep the device from starting.
func (m *model) loadFile(ctx context.Context, d *daemon, lg *lastGood, start bool) error {
	newReloader := func(ts []*pipeline, want []trt.Signature) (*reload.Reloader, error) {
		targets := make([]reload.Target, len(ts))
		in := map[*pipeline]bool{}
		for i, p := range ts {
			in[p] = true
			targets[i] = reload.Target{Name: p.cfg.Name, Hot: p.hot, Load: m.loadOptions(d, p), Accept: p.acceptEngine}
			if want != nil {
				targets[i].Want = want[i]
			}
		}
		// The model's other pipelines serve an engine that carried over:
		// the fresh ones share it when the file still holds its content.
		var peers []*trt.Hot
		for _, p := range m.targets {
			if !in[p] {
				peers = append(peers, p.hot)
			}
		}
		r, err := reload.New(reload.Options{
			Path: m.path, Model: m.cfg.Name, Backend: m.backend, Targets: targets, Peers: peers, MaxBytes: m.maxBytes,
			OnEvent: func(ev reload.Event) {
				d.onReload(ev)
				if lg != nil && ev.Outcome == reload.OutcomeReloaded {
					lg.keep(m.cfg.Name, m.path, ev.SHA256)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%w: model %q: %w", config.ErrInvalid, m.cfg.Name, err)
		}
		return r, nil
	}
	var fresh []*pipeline
	for _, p := range m.targets {
		if p.hot.Current() == nil {
			fresh = append(fresh, p)
		}
	}
	began := time.Now()
	if len(fresh) > 0 {
		r, err := newReloader(fresh, nil)
		if err != nil {
			return err
		}
		if err := r.Load(ctx); err != nil {
			r.Close()
			if ctx.Err() != nil {
				return err
			}
			// Not config.ErrInvalid: the file exists (CheckFiles) and its content
			// is unusable now (torn, still being written); exit 1 lets
			// Restart= retry.
			cause := err
			for _, p := range fresh {
				if berr := BatchProblem(p.conf, p.cfg, err); berr != err {
					return berr // the configuration asks what the model cannot do
				}
			}
			if !start || len(fresh) != len(m.targets) {
				return cause
			}
			return m.fallBack(ctx, d, lg, cause, newReloader)
		}
		if len(fresh) == len(m.targets) {
			m.watch = r // the start-up path: this Reloader goes on watching
		} else {
			r.Close() // the engines stay in the targets' Hots
		}
		if lg != nil {
			lg.keep(m.cfg.Name, m.path, fresh[0].hot.Current().SHA256)
		}
		for _, p := range fresh {
			gen := p.hot.Current()
			if err := p.bind(gen.Engine); err != nil {
				return err
			}
			d.log.Info("engine loaded", "model", m.cfg.Name, "pipeline", p.cfg.Name, "backend", gen.Engine.Backend(), "file", m.path,
				"generation", gen.Number, "sha256", gen.SHAPrefix(), "signature", trt.SignatureOf(gen.Engine).String(),
				"reload", m.cfg.ReloadEnabled(), "took", time.Since(began).Round(time.Millisecond).String())
		}
	}
	if m.watch == nil {
		want := make([]trt.Signature, len(m.targets))
		for i, p := range m.targets {
			want[i] = trt.SignatureOf(p.hot.Current().Engine)
		}
		r, err := newReloader(m.targets, want)
		if err != nil {
			return err
		}
		m.watch = r
	}
	return nil
}

// frameSize is the slot size a source needs by its configuration.
func frameSize(sc *config.Source) int {
	w, h := max(sc.Width, 1), max(sc.Height, 1)
	pf, err := sensors.ParsePixelFormat(sc.Format)
	if err != nil || sc.Format == "" {
		pf = sensors.RGB24
	}
	f := sensors.Format{Width: w, Height: h, Pixel: pf}
	n := f.FrameSize()
	// Decoded formats (MJPEG) and replays without a fixed size land as RGB24.
	return max(n, w*h*3)
}

func (m *model) loadOptions(d *daemon, p *pipeline) trt.LoadOptions {
	return LoadOptions(p.conf, m.cfg, p.cfg, d.alloc)
}

// LoadOptions are the options model mc's engine for pipeline pc of c
// (nil: no pipeline) is loaded with, tensors from alloc: the daemon's and
// edged check's. A batched pipeline's engine is loaded for its BatchSize.
func LoadOptions(c *config.Config, mc *config.Model, pc *config.Pipeline, alloc umem.Allocator) trt.LoadOptions {
	threads, _ := ModelThreads(c, mc)
	o := trt.LoadOptions{Name: mc.Name, Alloc: alloc, Threads: threads}
	if pc == nil {
		return o
	}
	o.Batch, _ = BatchSize(c, pc)
	if pp := pc.Preprocess; pp.Width > 0 && pp.Height > 0 {
		o.Image = &trt.ImageShape{Input: pp.Input, Height: int64(pp.Height), Width: int64(pp.Width), Layout: pp.Layout}
	}
	return o
}

// fallBack serves the kept copy of the last good model file after the
// configured file failed with cause. It returns cause when there is no
// usable copy.
func (m *model) fallBack(ctx context.Context, d *daemon, lg *lastGood, cause error, newReloader func([]*pipeline, []trt.Signature) (*reload.Reloader, error)) error {
	if lg == nil {
		return cause
	}
	data, sum, err := lg.load(m.cfg.Name, m.path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("cannot read the kept copy of the last good model", "model", m.cfg.Name, "err", err)
		}
		return cause
	}
	if err := m.stageInto(ctx, d, m.targets, data, sum, lg.file(m.cfg.Name)); err != nil {
		d.log.Error("the kept copy of the last good model does not load either", "model", m.cfg.Name, "err", err)
		return cause
	}
	want := make([]trt.Signature, len(m.targets))
	for i, p := range m.targets {
		want[i] = trt.SignatureOf(p.hot.Current().Engine)
	}
	d.log.Error("model file unusable at start; serving the last good copy from the state folder until the file is fixed",
		"event", "engine_fallback", "model", m.cfg.Name, "file", m.path, "copy", lg.file(m.cfg.Name), "sha256", shaPrefix(sum), "err", cause)
	for _, p := range m.targets {
		d.publish(&stream.Record{Kind: stream.KindStatus, Event: "engine_fallback", Pipeline: p.cfg.Name, Source: m.cfg.Name, Model: m.cfg.Name,
			Reason: cause.Error(), TNs: monoNow(), Engine: stream.EngineRef{Name: m.cfg.Name, Generation: p.hot.Current().Number, SHA256: shaPrefix(sum)}})
	}
	// Keep watching the configured file: the first good version of it
	// replaces the copy (its signature must match what the pipelines
	// were built for).
	r, err := newReloader(m.targets, want)
	if err != nil {
		return err
	}
	m.watch = r
	return nil
}

// loadBuiltin loads a built-in model for the pipelines ps through the
// reload transaction's staging step (reload.StageSet: once for all of
// them, or shared from a pipeline of the model already serving it), binds
// each pipeline to its engine and installs them.
func (m *model) loadBuiltin(ctx context.Context, d *daemon, ps []*pipeline) error {
	name, _ := m.cfg.Builtin()
	data, err := config.BuiltinModel(name)
	if err != nil {
		return fmt.Errorf("%w: model %q: %w", config.ErrInvalid, m.cfg.Name, err)
	}
	if err := m.stageInto(ctx, d, ps, data, sha256.Sum256(data), m.cfg.Path); err != nil {
		if ctx.Err() != nil || errors.Is(err, trt.ErrMemory) {
			return err // a stop, or memory in use now: not the configuration
		}
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	return nil
}

// stageInto stages model bytes (hash sum, read from from) for the
// pipelines ps as a reload stages them (reload.StageSet: staging gate,
// memory budget, signature, warm-up with its timeout; the model loaded
// once and shared, or shared from an engine of one of the model's
// pipelines that already serves this content), binds each pipeline to its
// engine and installs them as one generation.
func (m *model) stageInto(ctx context.Context, d *daemon, ps []*pipeline, data []byte, sum [32]byte, from string) error {
	start := time.Now()
	var donor *trt.Generation
	number := uint64(1)
	for _, p := range m.targets {
		if g := p.hot.Acquire(); g != nil {
			if g.SHA256 == sum && donor == nil {
				donor = g
				number = g.Number
				continue
			}
			g.Release()
		}
	}
	var base trt.Engine
	if donor != nil {
		defer donor.Release()
		base = donor.Engine
	}
	loads := make([]trt.LoadOptions, len(ps))
	hots := make([]*trt.Hot, len(ps))
	for i, p := range ps {
		loads[i], hots[i] = m.loadOptions(d, p), p.hot
	}
	set, i, err := reload.StageSet(ctx, data, base, loads, make([]trt.Signature, len(ps)), reload.StageOptions{Backend: m.backend})
	if berr := BatchProblem(ps[i].conf, ps[i].cfg, err); berr != err {
		return berr
	}
	if err != nil {
		return fmt.Errorf("model %q (%s) for pipeline %q: %w", m.cfg.Name, from, ps[i].cfg.Name, err)
	}
	for i, p := range ps {
		if err := p.bind(set.Engines[i]); err != nil {
			set.Close()
			return err
		}
	}
	for i, gen := range set.Install(hots, m.cfg.Name, sum, number) {
		d.log.Info("engine loaded", "model", m.cfg.Name, "pipeline", ps[i].cfg.Name, "backend", gen.Engine.Backend(), "file", from,
			"generation", gen.Number, "sha256", gen.SHAPrefix(), "shared", i > 0 || donor != nil, "signature", trt.SignatureOf(gen.Engine).String(),
			"took", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}

// LoadEngine loads model mc of c for pipeline pc (nil: for no pipeline)
// with backend, its tensors from alloc, the way the daemon loads it at
// start, for edged check: a model file through a reload.Reloader's Load (the
// size limit, the memory budget and the format checked before it is read
// whole, a file written in place waited for), a built-in model directly;
// both stage the engine as every reload does (reload.Stage). The engine is
// returned in a Hot of its own, which the caller closes.
func LoadEngine(ctx context.Context, c *config.Config, mc *config.Model, pc *config.Pipeline, backend trt.Backend, alloc umem.Allocator) (*trt.Hot, error) {
	hot := &trt.Hot{}
	load := LoadOptions(c, mc, pc, alloc)
	if name, ok := mc.Builtin(); ok {
		data, err := config.BuiltinModel(name)
		if err != nil {
			return nil, err
		}
		st, err := reload.Stage(ctx, data, load, trt.Signature{}, reload.StageOptions{Backend: backend})
		if err != nil {
			return nil, err
		}
		st.Install(hot, mc.Name, sha256.Sum256(data))
		return hot, nil
	}
	target := reload.Target{Name: mc.Name, Hot: hot, Load: load}
	if pc != nil {
		target.Name = pc.Name
	}
	r, err := reload.New(reload.Options{Path: c.Resolve(mc.Path), Model: mc.Name, Backend: backend,
		Targets: []reload.Target{target}, MaxBytes: c.Daemon.MaxModelBytes})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.Load(ctx); err != nil {
		hot.Close()
		return nil, err
	}
	return hot, nil
}

// ShareEngine gives pipeline pc (nil: no pipeline) of model mc of c an
// engine shared from the one base serves, as the daemon gives every
// pipeline of a model after the first (reload.StageSet from a serving
// engine: its own tensors, its signature checked, warmed up; the model not
// loaded again), for edged check. Where the engine cannot be shared after
// all, the pipeline gets one of its own from the model's bytes, read again
// (and required to be the content base serves), as the daemon loads one
// from the bytes it holds: check fails no model that run serves. The
// engine is returned in a Hot of its own at base's generation, which the
// caller closes (before or after base).
func ShareEngine(ctx context.Context, c *config.Config, base *trt.Hot, mc *config.Model, pc *config.Pipeline, backend trt.Backend, alloc umem.Allocator) (*trt.Hot, error) {
	gen := base.Acquire()
	if gen == nil {
		return nil, trt.ErrClosed
	}
	defer gen.Release()
	o := reload.StageOptions{Backend: backend, Model: func() ([]byte, error) { return modelContent(c, mc, gen.SHA256) }}
	set, _, err := reload.StageSet(ctx, nil, gen.Engine, []trt.LoadOptions{LoadOptions(c, mc, pc, alloc)}, []trt.Signature{{}}, o)
	if err != nil {
		return nil, err
	}
	hot := &trt.Hot{}
	set.Install([]*trt.Hot{hot}, mc.Name, gen.SHA256, gen.Number)
	return hot, nil
}

// modelContent reads model mc's content (a built-in model's, or its file's
// through regfile within daemon.max_model_bytes) and requires it to be the
// content with hash sum.
func modelContent(c *config.Config, mc *config.Model, sum [32]byte) ([]byte, error) {
	var data []byte
	if name, ok := mc.Builtin(); ok {
		b, err := config.BuiltinModel(name)
		if err != nil {
			return nil, err
		}
		data = b
	} else {
		path := c.Resolve(mc.Path)
		f, _, err := regfile.Open(path, c.Daemon.MaxModelBytes)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if data, err = io.ReadAll(io.LimitReader(f, c.Daemon.MaxModelBytes+1)); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if int64(len(data)) > c.Daemon.MaxModelBytes {
			return nil, fmt.Errorf("%s: larger than daemon.max_model_bytes (%d)", path, c.Daemon.MaxModelBytes)
		}
	}
	if sha256.Sum256(data) != sum {
		return nil, fmt.Errorf("model %q changed since it was loaded", mc.Name)
	}
	return data, nil
}

// triggerEngines asks every watched model file to be checked now. A nil
// graph (none built yet) has nothing to check.
func (g *graph) triggerEngines() {
	if g == nil {
		return
	}
	for _, m := range g.models {
		if m.watch != nil {
			m.watch.Trigger()
		}
	}
}

// runSensor supervises one serial sensor: samples go into its ring; on
// failure it closes the device and retries with capped, jittered backoff,
// announcing as a camera's capture loop does (restarts).
func (d *daemon) runSensor(ctx context.Context, e *sensorEntry) {
	log := d.log.With("source", e.cfg.Name)
	var rs restarts
	if e.up.Load() {
		rs.started() // startSensor opened it
	} else {
		rs.downOut = true // absent at start: its first start is announced
	}
	for ctx.Err() == nil {
		if !e.up.Load() {
			if err := e.src.Start(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				delay := rs.startFailed()
				rs.errs.log(log, "sensor start failed; retrying", "retry_in", delay.Round(time.Millisecond).String(), "err", err)
				if !backoff.Sleep(ctx, delay) {
					return
				}
				continue
			}
			e.up.Store(true)
			if rs.started() {
				log.Info("sensor up", "event", "source_up")
				d.publishStatus("source_up", "", e.cfg.Name, "")
			}
		}
		var err error
		for {
			var s sensors.Sample
			if s, err = e.src.Next(ctx); err != nil {
				break
			}
			if rs.delivering() {
				log.Info("sensor up", "event", "source_up")
				d.publishStatus("source_up", "", e.cfg.Name, "")
			}
			e.ring.Push(s)
		}
		if ctx.Err() != nil {
			return
		}
		e.up.Store(false)
		announce, delay := rs.ended()
		if announce {
			log.Warn("sensor down", "event", "source_down", "err", err)
			d.publishStatus("source_down", "", e.cfg.Name, err.Error())
		} else {
			rs.errs.log(log, "sensor failed again soon after it started; retrying", "retry_in", delay.Round(time.Millisecond).String(), "err", err)
		}
		e.src.Close()
		if delay > 0 && !backoff.Sleep(ctx, delay) {
			return
		}
	}
}

// fps is the pipeline's result rate over its lifetime window.
func (p *pipeline) fps() float64 {
	return p.rate.update(p.stats.results.Load())
}
