package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edged-dev/edged/internal/regfile"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
)

// A configuration change is a transaction, like an engine reload:
//
//  1. prepare builds the next graph beside the running one. Every part
//     whose configuration is unchanged is taken over as it is, running:
//     pipelines (their source, frame pool, engine and loops, so frame_seq
//     and the engine generation go on), serial sensors and model watchers.
//     Engines already in memory carry over to rebuilt pipelines when the
//     engine would be built the same way from the same content (SHA-256).
//     Everything else is built but not started: new backends and engines
//     are loaded, validated and warmed up, cameras are constructed (not
//     opened), and the memory the new configuration needs is checked.
//     Nothing that runs is touched, so a failure here leaves the running
//     graph serving as it was.
//  2. commit stops the pipelines and sensors that are replaced or removed
//     (a device cannot be opened by the old and the new graph at once),
//     changes the sinks, starts what is new and frees what the next graph
//     does not use.
//  3. If commit fails (a device that will not open, a socket that cannot
//     be bound), what was started is stopped and the previous
//     configuration is rebuilt the same way, from the engines still in
//     memory: nothing is read from model files. A pipeline that cannot be
//     restarted either is marked failed: the daemon stays up for its
//     sinks and other pipelines, but it withholds the watchdog pings and
//     says why in STATUS=, so systemd restarts it.
type reconfig int

const (
	reconfigStart   reconfig = iota // nothing runs yet; a failure ends the daemon
	reconfigReload                  // a failure restores the running configuration
	reconfigRestore                 // what cannot start is marked failed
)

var keySeq atomic.Uint64

// configKey identifies a piece of effective configuration; equal keys
// mean the part built from it would be built the same way.
func configKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // NaN and the like: never equal, so the part is rebuilt
		return fmt.Sprintf("unencodable %d: %v", keySeq.Add(1), err)
	}
	return string(b)
}

// modelPath is where a model's engines come from: the resolved file, or
// the built-in name.
func modelPath(c *config.Config, mc *config.Model) string {
	if mc == nil {
		return ""
	}
	if _, builtin := mc.Builtin(); builtin {
		return mc.Path
	}
	return c.Resolve(mc.Path)
}

// pipelineKey covers everything a running pipeline was built from except
// its engine: its own table, its source, its sensors, its sinks and the
// stall budget its loops pace themselves by.
func pipelineKey(c *config.Config, pc *config.Pipeline) string {
	k := struct {
		Pipeline  config.Pipeline
		Source    *config.Source
		SrcFiles  string // a network camera's password file
		Replay    string
		Recording string
		Sensors   []*config.Source
		Sinks     []*config.Sink
		SinkFiles []string
		Stall     time.Duration
		// The other cameras of a batched pipeline, as Source, SrcFiles,
		// Replay and Recording for its first.
		More []string
	}{Pipeline: *pc, Stall: c.Daemon.StallTimeout.Duration}
	for i, name := range pc.Cameras() {
		sc := c.Source(name)
		files, replay, recording := c.SourceFiles(sc), "", ""
		if sc != nil && sc.Path != "" {
			replay = c.Resolve(sc.Path)
			recording = fileStamp(replay)
		}
		if i == 0 {
			k.Source, k.SrcFiles, k.Replay, k.Recording = sc, files, replay, recording
			continue
		}
		k.More = append(k.More, configKey(sc), files, replay, recording)
	}
	for _, s := range pc.Sensors {
		k.Sensors = append(k.Sensors, c.Source(s))
	}
	for _, s := range pc.Sinks {
		sc := c.Sink(s)
		k.Sinks = append(k.Sinks, sc)
		if sc != nil {
			k.SinkFiles = append(k.SinkFiles, c.SinkFiles(sc))
		}
	}
	return configKey(k)
}

// fileStamp identifies the version of a replay recording, or of an image
// folder and the images in it, as far as stat tells (inode, size,
// modification time): a reload after the recording was replaced or
// rewritten restarts its pipeline, which then reads it again.
func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "error: " + err.Error()
	}
	stamp := func(fi os.FileInfo) string {
		ino := uint64(0)
		if s, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = s.Ino
		}
		return fmt.Sprintf("%s:%d:%d:%d;", fi.Name(), ino, fi.Size(), fi.ModTime().UnixNano())
	}
	if !st.IsDir() {
		return stamp(st)
	}
	h := sha256.New()
	io.WriteString(h, stamp(st))
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			io.WriteString(h, stamp(fi))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// backendKey covers what a model's backend is created from.
func backendKey(c *config.Config, mc *config.Model) string {
	bn, _ := config.ModelBackend(mc)
	return configKey(struct {
		Model, Backend, ORT, TRT string
		VersionCompatible, Debug bool
	}{mc.Name, bn, c.Resolve(c.Daemon.OnnxRuntimeLib), c.GPU.TensorRTLibrary, mc.VersionCompatible, c.Daemon.LogLevel == "debug"})
}

// engineKey covers what a pipeline's engine is loaded with, except the
// model content.
func engineKey(c *config.Config, pc *config.Pipeline) string {
	mc := c.Model(pc.Model)
	if mc == nil {
		return ""
	}
	pp := pc.Preprocess
	threads, _ := ModelThreads(c, mc)
	return configKey(struct {
		Backend       string
		Threads       int
		Input         string
		Width, Height int
		Batch         int `json:",omitempty"`
	}{backendKey(c, mc), threads, pp.Input, pp.Width, pp.Height, batchOf(c, pc)})
}

// modelKey covers a model and the engines of every pipeline using it: a
// model whose key is unchanged keeps its watcher and its engines.
func modelKey(c *config.Config, mc *config.Model, targets []*config.Pipeline) string {
	k := struct {
		Model   config.Model
		Path    string
		State   string
		Engines [][2]string
	}{Model: *mc, Path: modelPath(c, mc), State: stateDir(c)}
	for _, pc := range targets {
		k.Engines = append(k.Engines, [2]string{pc.Name, engineKey(c, pc)})
	}
	return configKey(k)
}

// sameContent reports whether the file at path holds content with hash
// sum. It is hashed as it streams by, through regfile: a path that leads
// to a FIFO or a device, or a file larger than limit, is not the same
// content, and never blocks or fills the memory.
func sameContent(path string, sum [32]byte, limit int64) bool {
	if path == "" {
		return false
	}
	f, _, err := regfile.Open(path, limit)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, limit+1)); err != nil {
		return false
	}
	return [32]byte(h.Sum(nil)) == sum
}

// start builds and starts the first graph.
func (d *daemon) start(ctx context.Context, c *config.Config) error {
	base := d.currentGraph()
	next, err := d.prepare(ctx, base, c, reconfigStart)
	if err != nil {
		return err
	}
	d.structMu.Lock()
	defer d.structMu.Unlock()
	if ctx.Err() != nil { // stopped while preparing: start nothing
		d.release(next, base, time.Now().Add(c.Daemon.StopTimeout.Duration))
		return ctx.Err()
	}
	if err := d.commit(base, next, reconfigStart); err != nil {
		d.release(next, base, time.Now().Add(c.Daemon.StopTimeout.Duration))
		return err
	}
	return nil
}

// reconfigure replaces the running configuration with c (see the comment
// on reconfig). It returns nil when c runs; otherwise the running
// configuration is kept (or restored) and the error says why.
func (d *daemon) reconfigure(ctx context.Context, c *config.Config) error {
	base := d.currentGraph()
	next, err := d.prepare(ctx, base, c, reconfigReload)
	if err != nil {
		return err // nothing running was touched
	}
	// Only now is anything of the running graph touched, one change at a
	// time: a stop asked for meanwhile wins, and this reload commits
	// nothing.
	d.structMu.Lock()
	defer d.structMu.Unlock()
	if ctx.Err() != nil {
		d.release(next, base, time.Now().Add(c.Daemon.StopTimeout.Duration))
		return ctx.Err()
	}
	d.setReloadStep("replacing what changed")
	err = d.commit(base, next, reconfigReload)
	if err == nil {
		return nil
	}
	var untouched untouchedError
	if errors.As(err, &untouched) {
		d.release(next, base, time.Now().Add(c.Daemon.StopTimeout.Duration))
		return untouched.error // nothing was stopped: nothing to restore
	}
	d.log.Error("new configuration failed to start; restoring the previous one", "err", err)
	d.setReloadStep("restoring the previous configuration (%v)", err)
	d.release(next, base, time.Now().Add(c.Daemon.StopTimeout.Duration))
	restore, rerr := d.prepare(ctx, base, base.cfg, reconfigRestore)
	if rerr != nil { // only a cancelled context gets here
		return fmt.Errorf("%w; restoring the previous configuration failed too: %w", err, rerr)
	}
	d.commit(base, restore, reconfigRestore)
	if len(restore.failed) > 0 {
		var errs []error
		for name, f := range restore.failed {
			errs = append(errs, fmt.Errorf("pipeline %q: %w", name, f.err))
		}
		return fmt.Errorf("%w; the previous configuration could not be fully restored: %w", err, errors.Join(errs...))
	}
	return err
}

// prepare builds the graph for c from base (see reconfig). It never stops,
// changes or restarts anything of base; on error it frees what it built.
// In restore mode it does not fail: a pipeline that cannot be built is
// put in the graph's failed set.
func (d *daemon) prepare(ctx context.Context, base *graph, c *config.Config, mode reconfig) (_ *graph, err error) {
	pr := &preparing{d: d, ctx: ctx, base: base, next: newGraph(d, c), c: c, mode: mode, restoring: mode == reconfigRestore,
		sensorErr: map[string]error{}, carried: map[string]*trt.Hot{}}
	defer func() {
		if err != nil {
			d.release(pr.next, base, time.Now().Add(c.Daemon.StopTimeout.Duration))
		}
	}()
	if dir := stateDir(c); dir != "" {
		if lg := base.lastGood; lg != nil && lg.root == dir {
			pr.next.lastGood = lg
		} else {
			pr.next.lastGood = newLastGood(dir, d.log, c.Daemon.MaxModelBytes)
		}
	}
	if err := pr.sensors(); err != nil {
		return nil, err
	}
	pr.models()
	if err := pr.pipelines(); err != nil {
		return nil, err
	}
	// Frame pools and engines must fit in memory (with what base holds,
	// which a reload frees) before anything is allocated.
	if !pr.restoring {
		if err := d.checkMemory(base, pr.next); err != nil {
			return nil, err
		}
	}
	if err := pr.engines(); err != nil {
		return nil, err
	}
	if err := pr.bindCarried(); err != nil {
		return nil, err
	}
	return pr.next, nil
}

// preparing is one prepare in progress: the graph it builds (next) from
// the running one (base), and what one step of it tells the next.
type preparing struct {
	d          *daemon
	ctx        context.Context
	base, next *graph
	c          *config.Config
	mode       reconfig
	restoring  bool

	sensorErr map[string]error     // sensors that could not be built (restoring)
	prev      map[string]*pipeline // base's pipelines by name, running or failed
	order     []string             // model names, in the order pipelines name them
	byModel   map[string][]*config.Pipeline
	carried   map[string]*trt.Hot // pipeline name -> the Hot it keeps
}

// sensors builds the serial sensors the pipelines use, taking over the
// running ones whose configuration is unchanged. At start they are opened
// at once, so that they have samples when the first frame needs one.
func (pr *preparing) sensors() error {
	d, c, next := pr.d, pr.c, pr.next
	for _, pc := range c.Pipelines {
		for _, name := range pc.Sensors {
			if next.sensors[name] != nil || pr.sensorErr[name] != nil {
				continue
			}
			sc := c.Source(name)
			key := configKey(sc)
			if e := pr.base.sensors[name]; e != nil && e.key == key && e.running() {
				next.sensors[name] = e
				continue
			}
			src, err := d.opts.Factories.Sensor(sc, c)
			if err != nil {
				err = fmt.Errorf("sensor %q: %w", name, err)
				if !pr.restoring {
					return err
				}
				pr.sensorErr[name] = err
				continue
			}
			e := &sensorEntry{cfg: sc, key: key, src: src, ring: sensors.NewRing(sc.RingSize)}
			next.sensors[name] = e
			if pr.mode == reconfigStart {
				if err := d.startSensor(e, true); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// models decides, model by model, what carries over: an unchanged model
// keeps its watcher, backend and engines; otherwise a pipeline's engine
// carries over when it would be built the same way from the same content.
func (pr *preparing) models() {
	c, base, next := pr.c, pr.base, pr.next
	pr.prev = map[string]*pipeline{}
	for _, p := range base.pipelines {
		pr.prev[p.cfg.Name] = p
	}
	for name, f := range base.failed {
		pr.prev[name] = f.p
	}
	pr.byModel = map[string][]*config.Pipeline{}
	for i := range c.Pipelines {
		pc := &c.Pipelines[i]
		if pr.byModel[pc.Model] == nil {
			pr.order = append(pr.order, pc.Model)
		}
		pr.byModel[pc.Model] = append(pr.byModel[pc.Model], pc)
	}
	for _, name := range pr.order {
		mc, pcs := c.Model(name), pr.byModel[name]
		key := modelKey(c, mc, pcs)
		if m := base.models[name]; m != nil && m.key == key && allServing(pr.prev, pcs) {
			next.models[name] = m // unchanged: watcher, backend and engines stay
			for _, pc := range pcs {
				pr.carried[pc.Name] = pr.prev[pc.Name].hot
			}
			continue
		}
		m := &model{cfg: mc, key: key, bkey: backendKey(c, mc), maxBytes: c.Daemon.MaxModelBytes}
		if _, builtin := mc.Builtin(); !builtin {
			m.path = c.Resolve(mc.Path)
		}
		if old := base.models[name]; old != nil && old.bkey == m.bkey {
			m.backend = old.backend // engines it created may carry over
		}
		next.models[name] = m
		for _, pc := range pcs {
			if pr.carries(m, pc) {
				pr.carried[pc.Name] = pr.prev[pc.Name].hot
			}
		}
	}
}

// carries reports whether pipeline pc of changed model m keeps the engine
// its predecessor serves: the same backend and load options, and the same
// file, whose last validated content is what is in memory (the watcher
// deals with what is there now), or another file with the same content.
func (pr *preparing) carries(m *model, pc *config.Pipeline) bool {
	o := pr.prev[pc.Name]
	if o == nil || m.backend == nil || o.cfg.Model != m.cfg.Name || o.life.engine != engineKey(pr.c, pc) {
		return false
	}
	gen := o.hot.Current()
	if gen == nil {
		return false
	}
	return o.life.model == modelPath(pr.c, m.cfg) || sameContent(m.path, gen.SHA256, pr.c.Daemon.MaxModelBytes)
}

// fail records that pipeline p cannot be built: an error, unless
// restoring, which marks it failed instead.
func (pr *preparing) fail(p *pipeline, err error) error {
	if !pr.restoring {
		return err
	}
	pr.d.log.Error("pipeline cannot be restored", "pipeline", p.cfg.Name, "err", err)
	pr.next.failed[p.cfg.Name] = &failedPipeline{p: p, err: err}
	return nil
}

// pipelines takes over the unchanged pipelines running, and builds the
// others (not started) around the engine they carry over or an empty Hot,
// with their cameras constructed but not opened.
func (pr *preparing) pipelines() error {
	c, next := pr.c, pr.next
	for i := range c.Pipelines {
		pc := &c.Pipelines[i]
		o, hot := pr.prev[pc.Name], pr.carried[pc.Name]
		if o != nil && o.running() && hot == o.hot && o.life.key == pipelineKey(c, pc) {
			next.pipelines = append(next.pipelines, o)
			continue
		}
		var serr error
		for _, s := range pc.Sensors {
			serr = cmpErr(serr, pr.sensorErr[s])
		}
		if serr != nil {
			p := &pipeline{cfg: pc, hot: hot}
			if hot == nil {
				p.hot = &trt.Hot{}
			}
			pr.fail(p, serr)
			continue
		}
		p := next.newPipeline(pc, hot)
		if err := pr.cameras(p); err != nil {
			if err := pr.fail(p, err); err != nil {
				return err
			}
			continue
		}
		next.pipelines = append(next.pipelines, p)
	}
	return nil
}

func batchOf(c *config.Config, pc *config.Pipeline) int {
	n, _ := BatchSize(c, pc)
	return n
}

// cameras constructs the source of each of p's cameras (not opened); on
// an error those made are closed.
func (pr *preparing) cameras(p *pipeline) error {
	lanes := p.lanesOf()
	for i, l := range lanes {
		src, err := pr.d.opts.Factories.Camera(l.scfg, pr.c)
		if err != nil {
			for _, m := range lanes[:i] {
				m.src.Close()
			}
			return fmt.Errorf("%w: source %q: %w", config.ErrInvalid, l.scfg.Name, err)
		}
		l.src = src
	}
	return nil
}

// engines loads what does not carry over: a changed model goes through
// the same validation and warm-up as a hot reload, once for all of its
// pipelines that need an engine (shared from one of its carried engines
// when that has the content).
func (pr *preparing) engines() error {
	d, c, ctx := pr.d, pr.c, pr.ctx
	for _, name := range pr.order {
		m := pr.next.models[name]
		if m == pr.base.models[name] {
			continue
		}
		for _, p := range pr.next.pipelines {
			if p.cfg.Model == name {
				m.targets = append(m.targets, p)
			}
		}
		if len(m.targets) == 0 { // restoring, and every pipeline of it failed
			continue
		}
		if m.backend == nil {
			bn, err := config.ModelBackend(m.cfg)
			if err != nil {
				return fmt.Errorf("%w: model %q: %w", config.ErrInvalid, name, err)
			}
			if m.backend, err = d.opts.Factories.Backend(bn, m.cfg, c); err != nil {
				return fmt.Errorf("%w: model %q: %w", config.ErrInvalid, name, err)
			}
		}
		if m.path != "" {
			d.setReloadStep("loading model %s from %s", name, m.path)
		} else {
			d.setReloadStep("loading model %s", name)
		}
		if failpoint(ctx, "model/load") {
			return fmt.Errorf("model %q: failpoint model/load", name)
		}
		if m.path != "" {
			if err := m.loadFile(ctx, d, pr.next.lastGood, pr.mode == reconfigStart); err != nil {
				return err
			}
			continue
		}
		var fresh []*pipeline
		for _, p := range m.targets {
			if p.hot.Current() == nil {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) > 0 {
			if err := m.loadBuiltin(ctx, d, fresh); err != nil {
				return err
			}
		}
	}
	return nil
}

// bindCarried binds the rebuilt pipelines to the engines they carried
// over (the others were bound when their engines were loaded).
func (pr *preparing) bindCarried() error {
	kept := map[*pipeline]bool{}
	for _, p := range pr.base.pipelines {
		kept[p] = true
	}
	var built []*pipeline
	for _, p := range pr.next.pipelines {
		if !kept[p] && pr.carried[p.cfg.Name] != nil {
			if err := p.bind(p.hot.Current().Engine); err != nil {
				if err := pr.fail(p, err); err != nil {
					return err
				}
				p.closeSources()
				continue
			}
		}
		built = append(built, p)
	}
	pr.next.pipelines = built
	return nil
}

func allServing(prev map[string]*pipeline, pcs []*config.Pipeline) bool {
	for _, pc := range pcs {
		if o := prev[pc.Name]; o == nil || o.hot.Current() == nil {
			return false
		}
	}
	return true
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// commit replaces base by next (see reconfig). On error (not in restore
// mode) the caller releases next and restores base.
func (d *daemon) commit(base, next *graph, mode reconfig) error {
	// New resources first, while everything runs: a sink that cannot be
	// built (a socket that cannot be bound) stops nothing (sinks.go).
	early, err := d.buildEarlySinks(next.cfg)
	if err != nil {
		if mode != reconfigRestore {
			return untouchedError{err}
		}
		d.log.Error("sink cannot be restored", "err", err)
	}
	defer closeSinks(early) // those not put in place
	deadline := time.Now().Add(next.cfg.Daemon.StopTimeout.Duration)
	in := next.parts()
	var stopping []*pipeline
	keptPipes := []*pipeline{}
	for _, p := range base.pipelines {
		switch {
		case in.pipes[p]:
			keptPipes = append(keptPipes, p)
		case p.running(): // restoring: those replaced stopped already
			stopping = append(stopping, p)
		}
	}
	var stoppingSensors []*sensorEntry
	keptSensors := map[string]*sensorEntry{}
	for name, e := range base.sensors {
		switch {
		case in.sensors[e]:
			keptSensors[name] = e
		case e.running():
			stoppingSensors = append(stoppingSensors, e)
		}
	}
	if len(stopping) > 0 || len(stoppingSensors) > 0 {
		// While parts are replaced, readers (metrics, status, health) see
		// what keeps running.
		interim := newGraph(d, base.cfg)
		interim.pipelines, interim.sensors, interim.models, interim.lastGood = keptPipes, keptSensors, base.models, base.lastGood
		interim.transitional = true
		d.setGraph(interim, false)
		for _, p := range stopping {
			p.log.Info("pipeline stopped for the new configuration")
			if err := d.stopPipeline(p, deadline); err != nil {
				d.log.Warn("stopping a pipeline", "err", err)
			}
		}
		for _, e := range stoppingSensors {
			if err := d.stopSensor(e, deadline); err != nil {
				d.log.Warn("stopping a sensor", "err", err)
			}
		}
	}
	if err := d.startSinks(next.cfg, early); err != nil {
		if mode != reconfigRestore {
			return err
		}
		d.log.Error("sink cannot be restored", "err", err)
	}
	if lg := next.lastGood; lg != nil && lg != base.lastGood {
		lg.start()
	}
	for _, e := range next.sensors {
		if e.cancel != nil {
			continue // running
		}
		if err := d.startSensor(e, mode != reconfigRestore); err != nil {
			return err
		}
	}
	var running []*pipeline
	started := 0
	for _, p := range next.pipelines {
		if p.life.cancel == nil {
			started++
			if err := d.startPipeline(p); err != nil {
				if mode != reconfigRestore {
					return err
				}
				d.log.Error("pipeline cannot be restored", "pipeline", p.cfg.Name, "err", err)
				next.failed[p.cfg.Name] = &failedPipeline{p: p, err: err}
				continue
			}
		}
		running = append(running, p)
	}
	next.pipelines = running
	d.release(base, next, deadline)
	for _, m := range next.models {
		if !m.started {
			m.started = true
			if r, ok := m.watch.(*reload.Reloader); ok && m.cfg.ReloadEnabled() {
				r.Start()
			}
		}
	}
	d.setGraph(next, started == 0 && len(next.failed) == 0)
	return nil
}

// parts is a graph's parts by identity.
type parts struct {
	pipes    map[*pipeline]bool
	hots     map[*trt.Hot]bool
	sensors  map[*sensorEntry]bool
	models   map[*model]bool
	backends map[trt.Backend]bool
}

func (g *graph) parts() parts {
	ps := parts{pipes: map[*pipeline]bool{}, hots: map[*trt.Hot]bool{}, sensors: map[*sensorEntry]bool{}, models: map[*model]bool{}, backends: map[trt.Backend]bool{}}
	for _, p := range g.all() {
		ps.pipes[p] = true
		ps.hots[p.hot] = true
	}
	for _, e := range g.sensors {
		ps.sensors[e] = true
	}
	for _, m := range g.models {
		ps.models[m] = true
		if m.backend != nil {
			ps.backends[m.backend] = true
		}
	}
	return ps
}

// all is every pipeline of g, running or failed.
func (g *graph) all() []*pipeline {
	out := append([]*pipeline(nil), g.pipelines...)
	for _, f := range g.failed {
		out = append(out, f.p)
	}
	return out
}

// release stops and frees every part of a that b does not use, in the
// order their dependencies need: pipelines, sensors, model watchers,
// engines, backends, the state writer.
func (d *daemon) release(a, b *graph, deadline time.Time) {
	in := b.parts()
	for _, p := range a.all() {
		if !in.pipes[p] {
			if err := d.stopPipeline(p, deadline); err != nil {
				d.log.Warn("stopping a pipeline", "err", err)
			}
		}
	}
	for _, e := range a.sensors {
		if !in.sensors[e] {
			if err := d.stopSensor(e, deadline); err != nil {
				d.log.Warn("stopping a sensor", "err", err)
			}
		}
	}
	for _, m := range a.models {
		if !in.models[m] && m.watch != nil {
			m.watch.Close()
		}
	}
	for _, p := range a.all() {
		if !in.hots[p.hot] {
			p.hot.Close()
		}
	}
	for _, m := range a.models {
		if in.models[m] || m.backend == nil || in.backends[m.backend] {
			continue
		}
		in.backends[m.backend] = true // closed once
		if c, ok := m.backend.(io.Closer); ok {
			if err := c.Close(); err != nil {
				d.log.Warn("closing backend", "model", m.cfg.Name, "err", err)
			}
		}
	}
	if lg := a.lastGood; lg != nil && lg != b.lastGood {
		lg.stop()
	}
}

// currentGraph is the graph the run goroutine works on.
func (d *daemon) currentGraph() *graph {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.graph
}

// setGraph publishes g to readers. ready keeps the readiness already
// announced (nothing restarted); otherwise readiness is announced again
// once every pipeline has a result.
func (d *daemon) setGraph(g *graph, ready bool) {
	d.mu.Lock()
	d.graph, d.cfg = g, g.cfg
	d.ready = d.ready && ready
	d.mu.Unlock()
	if !g.transitional {
		d.keepPictures(g)
	}
}
