package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// graph is everything built from one configuration except the sinks:
// sensor sources, models and pipelines. It is replaced as a whole on a
// configuration reload.
type graph struct {
	d         *daemon
	cfg       *Config
	pipelines []*pipeline
	sensors   map[string]*sensorEntry
	models    map[string]*model
	lastGood  *lastGood // nil when there is no state_dir

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type sensorEntry struct {
	cfg  *SourceConfig
	src  sensors.SampleSource
	ring *sensors.Ring
	up   atomic.Bool // written by the sensor's goroutine, read by /metrics
}

// model is one [[model]] and the pipelines (targets) using it.
type model struct {
	cfg     *ModelConfig
	path    string // resolved; "" for built-in models
	backend trt.Backend
	targets []*pipeline
	watch   modelWatcher
	// maxBytes is daemon.max_model_bytes.
	maxBytes int64
}

// modelWatcher re-checks a model file (hot reload); nil when reload is off.
type modelWatcher interface {
	Trigger()
	Close() error
}

func (d *daemon) startGraph(parent context.Context, c *Config) (_ *graph, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &graph{d: d, cfg: c, sensors: map[string]*sensorEntry{}, models: map[string]*model{}, cancel: cancel}
	if dir := stateDir(c); dir != "" {
		g.lastGood = newLastGood(dir, d.log, c.Daemon.MaxModelBytes)
		g.wg.Add(1)
		go func() { defer g.wg.Done(); g.lastGood.run(ctx) }()
	}
	defer func() {
		if err != nil {
			g.stop(time.Now().Add(c.Daemon.StopTimeout.Duration))
		}
	}()
	// Serial sensors used by pipelines.
	for _, p := range c.Pipelines {
		for _, name := range p.Sensors {
			if g.sensors[name] != nil {
				continue
			}
			sc := c.Source(name)
			src, err := d.opts.Factories.Sensor(sc, c)
			if err != nil {
				return nil, fmt.Errorf("sensor %q: %w", name, err)
			}
			g.sensors[name] = &sensorEntry{cfg: sc, src: src, ring: sensors.NewRing(sc.RingSize)}
		}
	}
	for _, e := range g.sensors {
		if err := e.src.Start(parent); err != nil {
			if !e.cfg.Optional || !isAbsent(err) {
				return nil, fmt.Errorf("sensor %q (%s): %w", e.cfg.Name, e.cfg.Device, err)
			}
			d.log.Info("optional sensor absent; waiting for it", "source", e.cfg.Name, "device", e.cfg.Device, "err", err)
		} else {
			e.up.Store(true)
		}
	}
	// Pipelines: engines first (a pipeline's tensors are fixed by its
	// engine), then frame pools and sources.
	for i := range c.Pipelines {
		g.newPipeline(&c.Pipelines[i])
	}
	if err := g.loadModels(parent); err != nil {
		return nil, err
	}
	for _, p := range g.pipelines {
		if err := g.startSource(parent, p); err != nil {
			return nil, err
		}
	}
	for _, m := range g.models {
		if r, ok := m.watch.(*trt.Reloader); ok && m.cfg.ReloadEnabled() {
			r.Start()
		}
	}
	for _, e := range g.sensors {
		g.wg.Add(1)
		go func() { defer g.wg.Done(); g.runSensor(ctx, e) }()
	}
	for _, p := range g.pipelines {
		p.stampCapture()
		p.stampInfer()
		g.wg.Add(2)
		go func() { defer g.wg.Done(); p.capture(ctx) }()
		go func() { defer g.wg.Done(); p.infer(ctx) }()
	}
	return g, nil
}

// isAbsent reports whether a start error means the device is not there
// (as opposed to being there and failing).
func isAbsent(err error) bool {
	return errors.Is(err, sensors.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, sensors.ErrDeviceGone)
}

func (g *graph) newPipeline(pc *PipelineConfig) *pipeline {
	d, c := g.d, g.cfg
	p := &pipeline{d: d, stall: c.Daemon.StallTimeout.Duration, conf: c, cfg: pc, scfg: c.Source(pc.Source), log: d.log.With("pipeline", pc.Name), hot: &trt.Hot{},
		mb: newMailbox(pc.Schedule == "latest", pc.Queue)}
	for _, name := range pc.Sensors {
		p.rings = append(p.rings, g.sensors[name].ring)
	}
	for _, name := range pc.Sinks {
		p.sinks = append(p.sinks, d.sinks[name].sink)
	}
	g.pipelines = append(g.pipelines, p)
	return p
}

// startSource builds the pipeline's frame pool and starts its source; an
// optional source that is absent is waited for by the capture loop.
func (g *graph) startSource(ctx context.Context, p *pipeline) error {
	d, c, sc, pc := g.d, g.cfg, p.scfg, p.cfg
	src, err := d.opts.Factories.Camera(sc, c)
	if err != nil {
		return fmt.Errorf("%w: source %q: %w", ErrConfig, sc.Name, err)
	}
	p.src = src
	// Slots: the device's buffers, one in the mailbox (or the queue), one
	// being preprocessed, one spare so capture never waits on inference.
	slots := sc.Buffers + 2 + cap(p.mb.ch)
	size := frameSize(sc)
	if h, ok := src.(interface{ SlotSize() int }); ok && h.SlotSize() > 0 {
		size = h.SlotSize()
	}
	if p.pool, err = umem.NewPool(d.alloc, slots, size); err != nil {
		return fmt.Errorf("pipeline %q: frame pool of %d × %d bytes: %w", pc.Name, slots, size, err)
	}
	if err := src.Start(ctx, poolAdapter{p.pool}); err != nil {
		if !sc.Optional || !isAbsent(err) {
			return fmt.Errorf("source %q: %w", sc.Name, err)
		}
		p.log.Info("optional source absent; waiting for it", "source", sc.Name, "device", sc.Device, "err", err)
		p.state.Store(int32(stateWaiting))
		return nil
	}
	p.sourceUpEvent()
	p.log.Info("pipeline started", "source", sc.Name, "format", src.Format().String(), "model", pc.Model,
		"input", fmt.Sprintf("%dx%dx%d", p.c, p.h, p.w), "schedule", pc.Schedule)
	return nil
}

// loadModels loads every model for the pipelines that use it. File models
// go through a trt.Reloader, so start-up runs the same validation and
// warm-up as a hot reload, and the same Reloader watches the file later.
func (g *graph) loadModels(ctx context.Context) error {
	byModel := map[string][]*pipeline{}
	var order []string
	for _, p := range g.pipelines {
		if byModel[p.cfg.Model] == nil {
			order = append(order, p.cfg.Model)
		}
		byModel[p.cfg.Model] = append(byModel[p.cfg.Model], p)
	}
	for _, name := range order {
		m, err := g.model(name)
		if err != nil {
			return err
		}
		m.targets = byModel[name]
		if m.path == "" {
			for _, p := range m.targets {
				if err := m.loadInto(ctx, g.d, p); err != nil {
					return err
				}
			}
			continue
		}
		if err := m.loadFile(ctx, g.d, g.lastGood); err != nil {
			return err
		}
	}
	return nil
}

// loadFile loads a model file into all its pipelines through a Reloader.
// When the file cannot be used and a copy of the last good one was kept in
// the state folder, that copy serves instead (and the file keeps being
// watched), so a power cut in the middle of replacing an engine does not
// keep the device from starting.
func (m *model) loadFile(ctx context.Context, d *daemon, lg *lastGood) error {
	newReloader := func(want []trt.Signature) (*trt.Reloader, error) {
		targets := make([]trt.Target, len(m.targets))
		for i, p := range m.targets {
			targets[i] = trt.Target{Name: p.cfg.Name, Hot: p.hot, Load: m.loadOptions(d, p)}
			if want != nil {
				targets[i].Want = want[i]
			}
		}
		r, err := trt.NewReloader(trt.ReloaderOptions{
			Path: m.path, Model: m.cfg.Name, Backend: m.backend, Targets: targets, MaxBytes: m.maxBytes,
			OnEvent: func(ev trt.ReloadEvent) {
				d.onReload(ev)
				if lg != nil && ev.Outcome == trt.OutcomeReloaded {
					lg.keep(m.cfg.Name, m.path, ev.SHA256)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%w: model %q: %w", ErrConfig, m.cfg.Name, err)
		}
		return r, nil
	}
	r, err := newReloader(nil)
	if err != nil {
		return err
	}
	m.watch = r
	start := time.Now()
	if err := r.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		r.Close()
		m.watch = nil
		// Not ErrConfig: the file exists (CheckFiles) and its content is
		// unusable now (torn, still being written); exit 1 lets Restart= retry.
		return m.fallBack(ctx, d, lg, err, newReloader)
	}
	if lg != nil {
		lg.keep(m.cfg.Name, m.path, m.targets[0].hot.Current().SHA256)
	}
	for _, p := range m.targets {
		gen := p.hot.Current()
		if err := p.bind(gen.Engine); err != nil {
			return err
		}
		d.log.Info("engine loaded", "model", m.cfg.Name, "pipeline", p.cfg.Name, "backend", gen.Engine.Backend(), "file", m.path,
			"generation", gen.Number, "sha256", gen.SHAPrefix(), "signature", trt.SignatureOf(gen.Engine).String(),
			"reload", m.cfg.ReloadEnabled(), "took", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}

// frameSize is the slot size a source needs.
func frameSize(sc *SourceConfig) int {
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

func (g *graph) model(name string) (*model, error) {
	if m := g.models[name]; m != nil {
		return m, nil
	}
	mc := g.cfg.Model(name)
	bn, err := ModelBackend(mc)
	if err != nil {
		return nil, fmt.Errorf("%w: model %q: %w", ErrConfig, name, err)
	}
	be, err := g.d.opts.Factories.Backend(bn, mc, g.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: model %q: %w", ErrConfig, name, err)
	}
	m := &model{cfg: mc, backend: be, maxBytes: g.cfg.Daemon.MaxModelBytes}
	if _, builtin := mc.Builtin(); !builtin {
		m.path = g.cfg.Resolve(mc.Path)
	}
	g.models[name] = m
	return m, nil
}

// read returns the model's bytes.
func (m *model) read() ([]byte, error) {
	if name, ok := m.cfg.Builtin(); ok {
		return BuiltinModel(name)
	}
	return os.ReadFile(m.path)
}

func (m *model) where() string {
	if m.path != "" {
		return m.path
	}
	return m.cfg.Path
}

func (m *model) loadOptions(d *daemon, p *pipeline) trt.LoadOptions {
	o := trt.LoadOptions{Name: m.cfg.Name, Alloc: d.alloc, Threads: max(m.cfg.Threads, 1)}
	if pp := p.cfg.Preprocess; pp.Width > 0 && pp.Height > 0 {
		in := pp.Input
		o.Shapes = map[string][]int64{in: {1, 3, int64(pp.Height), int64(pp.Width)}}
	}
	return o
}

// fallBack serves the kept copy of the last good model file after the
// configured file failed with cause. It returns cause when there is no
// usable copy.
func (m *model) fallBack(ctx context.Context, d *daemon, lg *lastGood, cause error, newReloader func([]trt.Signature) (*trt.Reloader, error)) error {
	if lg == nil {
		return cause
	}
	data, sum, err := lg.load(m.cfg.Name, m.path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("cannot use the kept copy of the last good model", "model", m.cfg.Name, "err", err)
		}
		return cause
	}
	want := make([]trt.Signature, len(m.targets))
	for i, p := range m.targets {
		if err := m.loadBytes(ctx, d, p, data, sum, lg.file(m.cfg.Name)); err != nil {
			d.log.Error("the kept copy of the last good model does not load either", "model", m.cfg.Name, "err", err)
			return cause
		}
		want[i] = trt.SignatureOf(p.hot.Current().Engine)
	}
	d.log.Error("model file unusable at start; serving the last good copy from the state folder until the file is fixed",
		"event", "engine_fallback", "model", m.cfg.Name, "file", m.path, "copy", lg.file(m.cfg.Name), "sha256", shaPrefix(sum), "err", cause)
	for _, p := range m.targets {
		d.publish(&stream.Record{Kind: stream.KindStatus, Event: "engine_fallback", Pipeline: p.cfg.Name, Source: m.cfg.Name,
			Reason: cause.Error(), TNs: monoNow(), Engine: stream.EngineRef{Name: m.cfg.Name, Generation: p.hot.Current().Number, SHA256: shaPrefix(sum)}})
	}
	// Keep watching the configured file: the first good version of it
	// replaces the copy (its signature must match what the pipelines
	// were built for).
	r, err := newReloader(want)
	if err != nil {
		return err
	}
	m.watch = r
	return nil
}

// loadInto loads the model for a pipeline at start-up: it must load, fit
// the pipeline and pass a warm-up inference.
func (m *model) loadInto(ctx context.Context, d *daemon, p *pipeline) error {
	data, err := m.read()
	if err != nil {
		return fmt.Errorf("%w: model %q: %w", ErrConfig, m.cfg.Name, err)
	}
	return m.loadBytes(ctx, d, p, data, sha256.Sum256(data), m.where())
}

// loadBytes loads model bytes for a pipeline, binds the pipeline to the
// engine's tensors, warms the engine up and installs it.
func (m *model) loadBytes(ctx context.Context, d *daemon, p *pipeline, data []byte, sum [32]byte, from string) error {
	start := time.Now()
	eng, err := m.backend.Load(ctx, data, m.loadOptions(d, p))
	if err != nil {
		return fmt.Errorf("%w: model %q (%s): %w", ErrConfig, m.cfg.Name, from, err)
	}
	if err := p.bind(eng); err != nil {
		eng.Close()
		return err
	}
	if err := WarmUp(ctx, eng); err != nil {
		eng.Close()
		return fmt.Errorf("%w: model %q (%s): %w", ErrConfig, m.cfg.Name, from, err)
	}
	gen := p.hot.Install(eng, m.cfg.Name, sum)
	d.log.Info("engine loaded", "model", m.cfg.Name, "pipeline", p.cfg.Name, "backend", eng.Backend(), "file", from,
		"generation", gen.Number, "sha256", gen.SHAPrefix(), "signature", trt.SignatureOf(eng).String(), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// WarmUp runs one inference on a mid-grey input and rejects outputs that
// are not finite.
func WarmUp(ctx context.Context, e trt.Engine) error {
	for _, t := range e.Inputs() {
		if v := t.Float32(); v != nil {
			for i := range v {
				v[i] = 0.5
			}
		}
	}
	if err := e.Infer(ctx); err != nil {
		return fmt.Errorf("%w: %w", trt.ErrWarmup, err)
	}
	for _, t := range e.Outputs() {
		for i, v := range t.Float32() {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: output %q value %d is %v", trt.ErrWarmup, t.Name, i, v)
			}
		}
	}
	return nil
}

func (g *graph) triggerEngines() {
	for _, m := range g.models {
		if m.watch != nil {
			m.watch.Trigger()
		}
	}
}

// runSensor supervises one serial sensor: samples go into its ring; on
// failure it closes the device and retries with capped, jittered backoff.
func (g *graph) runSensor(ctx context.Context, e *sensorEntry) {
	log := g.d.log.With("source", e.cfg.Name)
	backoff := minBackoff
	var errs rateLog
	for ctx.Err() == nil {
		if !e.up.Load() {
			if err := e.src.Start(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				errs.log(log, "sensor start failed; retrying", "retry_in", backoff.String(), "err", err)
				if !sleepCtx(ctx, jitter(backoff)) {
					return
				}
				backoff = min(backoff*2, maxBackoff)
				continue
			}
			e.up.Store(true)
			backoff = minBackoff
			log.Info("sensor up", "event", "source_up")
			g.d.publishStatus("source_up", "", e.cfg.Name, "")
		}
		for {
			s, err := e.src.Next(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				e.up.Store(false)
				log.Warn("sensor down", "event", "source_down", "err", err)
				g.d.publishStatus("source_down", "", e.cfg.Name, err.Error())
				e.src.Close()
				break
			}
			e.ring.Push(s)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stop cancels every loop, waits for them until deadline and releases
// sources, engines and frame pools.
func (g *graph) stop(deadline time.Time) error {
	g.cancel()
	for _, m := range g.models {
		if m.watch != nil {
			m.watch.Close()
		}
	}
	// Close sources so that a Next blocked in a device wakes up.
	for _, p := range g.pipelines {
		if p.src != nil {
			p.src.Close()
		}
	}
	for _, e := range g.sensors {
		e.src.Close()
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		err = errors.New("pipelines did not stop within the stop budget")
	}
	for _, p := range g.pipelines {
		p.mb.drain()
		if err == nil {
			p.closePreprocessors()
		}
		p.hot.Close()
		if p.pool != nil && err == nil {
			p.pool.Close()
		}
	}
	if err == nil {
		for _, m := range g.models {
			if c, ok := m.backend.(io.Closer); ok {
				if cerr := c.Close(); cerr != nil {
					g.d.log.Warn("closing backend", "model", m.cfg.Name, "err", cerr)
				}
			}
		}
	}
	return err
}

// fps is the pipeline's result rate over its lifetime window.
func (p *pipeline) fps() float64 {
	return p.rate.update(p.stats.results.Load())
}

// encodeConfig renders the effective configuration as TOML.
func encodeConfig(c *Config) (string, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(printable(c)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// EncodeConfig renders the effective configuration (defaults filled in) as
// TOML, for `edged config print`.
func EncodeConfig(c *Config) (string, error) { return encodeConfig(c) }
