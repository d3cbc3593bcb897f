package runtime

import (
	"sort"
	"sync"
	"time"

	"github.com/edged-dev/edged/runtime/board"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preview"
)

// previewSettings are the [daemon] preview keys of c.
func previewSettings(c *config.Config) preview.Settings {
	d := c.Daemon
	return preview.Settings{Enabled: d.Preview, FPS: d.PreviewFPS, Width: d.PreviewWidth, Clients: d.PreviewClients}
}

// newPreview makes the live preview's hub for the daemon's configuration;
// serveMetrics serves it.
func (d *daemon) newPreview() *preview.Hub {
	return preview.New(preview.Options{Settings: previewSettings(d.cfg), Status: d.previewStatus, Log: d.log})
}

// configurePreview applies a reloaded configuration's preview keys; the
// preview is served only where the metrics server listens, which needs a
// restart to move.
func (d *daemon) configurePreview(old, cfg *config.Config) {
	d.preview.Configure(previewSettings(cfg))
	if cfg.Daemon.Preview && old.Daemon.MetricsListen == "" {
		d.log.Warn("daemon.preview is on, but the metrics server did not start (metrics_listen was off at start): the preview is served once edged restarts")
	}
}

// keepPictures keeps the preview's taps of g's configuration (viewers of a
// pipeline a reload rebuilt keep watching) and closes the others.
func (d *daemon) keepPictures(g *graph) {
	keys := make([]preview.Key, 0, len(g.cfg.Pipelines))
	for _, pc := range g.cfg.Pipelines {
		for _, cam := range pc.Cameras() {
			keys = append(keys, preview.Key{Pipeline: pc.Name, Source: cam})
		}
	}
	d.preview.Keep(keys)
}

// previewStatus is what the preview's page shows: every pipeline's state,
// rate, latency, engine and camera, and the board.
func (d *daemon) previewStatus() preview.Status {
	g := d.currentGraph()
	st := preview.Status{Device: d.device, Version: Version, Time: time.Now()}
	if len(g.failed) > 0 {
		st.Problem = failedStatus(g)
	}
	now := monoNow()
	live := map[*pipeline]bool{}
	for _, p := range g.pipelines {
		live[p] = true
		st.Pipelines = append(st.Pipelines, d.pipelineStatus(p, now))
	}
	for name, f := range g.failed {
		fp := preview.Pipeline{Name: name, State: "failed", Reason: f.err.Error()}
		for _, cam := range f.p.cfg.Cameras() {
			fp.Sources = append(fp.Sources, preview.Source{Name: cam, Reason: "its pipeline failed"})
		}
		st.Pipelines = append(st.Pipelines, fp)
	}
	d.latency.prune(live)
	sort.Slice(st.Pipelines, func(i, j int) bool { return st.Pipelines[i].Name < st.Pipelines[j].Name })
	st.Board = d.boardForPage()
	return st
}

var stateNames = map[pipelineState]string{stateStarting: "starting", stateWaiting: "waiting", stateRunning: "running"}

// pipelineStatus is one pipeline on the page.
func (d *daemon) pipelineStatus(p *pipeline, now int64) preview.Pipeline {
	st := preview.Pipeline{Name: p.cfg.Name, State: stateNames[pipelineState(p.state.Load())],
		Results: p.stats.results.Load(), Dropped: p.stats.droppedStale.Load() + p.stats.droppedCorrupt.Load()}
	for _, l := range p.lanesOf() { // a batched pipeline: each of its cameras
		st.Requested += l.scfg.FPS
		src := preview.Source{Name: l.scfg.Name, Up: l.sourceUp.Load()}
		if why := l.downWhy.Load(); why != nil && !src.Up {
			src.Reason = *why
			if st.State == "waiting" && st.Reason == "" {
				st.Reason = "waiting for " + l.scfg.Name
			}
		}
		if f := l.format.Load(); f != nil {
			src.Format = *f
		}
		if l != p {
			st.Dropped += l.stats.droppedCorrupt.Load()
		}
		st.Sources = append(st.Sources, src)
	}
	if gen := p.hot.Current(); gen != nil {
		st.Engine = &preview.Engine{Model: gen.Model, Backend: gen.Engine.Backend(), Generation: gen.Number, SHA256: gen.SHAPrefix()}
	}
	st.FPS, st.Latency = d.latency.of(p, now)
	if s := p.slowStatus(); s != "" {
		st.Reason = s[2 : len(s)-1] // " (SLOW: …)"
	}
	st.Throttled = p.throttledStatus()
	return st
}

// boardForPage is the board's health as the page shows it (nil before
// the first read).
func (d *daemon) boardForPage() *preview.Board {
	snap := d.board.Snapshot()
	if snap == nil {
		return nil
	}
	bs := d.board.Status()
	b := &preview.Board{Pressure: bs.Pressure}
	if bs.Mode.Known {
		b.PowerMode = board.ModeLabel(bs.Mode)
	}
	for _, t := range bs.Throttling {
		b.Throttling = append(b.Throttling, t.String())
	}
	for _, z := range snap.Zones {
		if !z.HasTemp {
			continue
		}
		pz := preview.Zone{Name: z.Name, Celsius: z.Celsius}
		if c, ok := z.Passive(); ok {
			pz.Passive = &c
		}
		b.Zones = append(b.Zones, pz)
	}
	if snap.HasGPULoad {
		l := snap.GPULoad
		b.GPULoad = &l
	}
	if m := snap.Memory; m.HasMeminfo {
		b.MemAvail, b.MemTotal = m.Available, m.Total
	}
	for _, r := range snap.Rails {
		b.Rails = append(b.Rails, preview.Rail{Name: r.Name, Watts: r.Watts})
	}
	return b
}

// latencyWindows keeps, per pipeline, two marks of its counters and
// latency histogram at least latencyWindow apart, so the page's rate and
// p50/p99 cover the last 5 to 10 s (since the pipeline started, at first),
// not its whole life. It is read only when the page asks.
type latencyWindows struct {
	mu    sync.Mutex
	marks map[*pipeline]*[2]latencyMark // older, newer
}

const latencyWindow = 5 * time.Second

// of is p's results a second and latency quantiles over the window.
func (w *latencyWindows) of(p *pipeline, now int64) (float64, *preview.Latency) {
	cur := markOf(p, now)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.marks == nil {
		w.marks = map[*pipeline]*[2]latencyMark{}
	}
	m := w.marks[p]
	if m == nil {
		m = &[2]latencyMark{{t: p.started}, {t: p.started}}
		w.marks[p] = m
	}
	if time.Duration(now-m[1].t) >= latencyWindow {
		m[0], m[1] = m[1], cur
	}
	base := m[0]
	if cur.results < base.results || cur.hist.count < base.hist.count { // the pipeline's histogram was reset
		base = latencyMark{t: p.started}
	}
	secs := float64(now-base.t) / 1e9
	if secs <= 0 || base.t == 0 {
		return 0, nil
	}
	fps := float64(cur.results-base.results) / secs
	delta := cur.hist.minus(base.hist)
	if delta.count == 0 {
		return fps, nil
	}
	return fps, &preview.Latency{P50ms: 1000 * delta.quantile(0.5), P99ms: 1000 * delta.quantile(0.99), Window: secs, Results: delta.count}
}

// prune forgets the pipelines no longer running.
func (w *latencyWindows) prune(live map[*pipeline]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.marks {
		if !live[p] {
			delete(w.marks, p)
		}
	}
}

// latencyMark is a pipeline's counters at time t.
type latencyMark struct {
	t       int64
	results uint64
	hist    buckets
}

func markOf(p *pipeline, now int64) latencyMark {
	m := latencyMark{t: now, results: p.stats.results.Load()}
	if p.met.latency != nil {
		m.hist = readBuckets(p.met.latency)
	}
	return m
}
