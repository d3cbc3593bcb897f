package runtime

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A pipeline whose results come far slower than its source was asked for
// says so, and why, in STATUS= and the log.
const (
	perfWindow   = 5 * time.Second // rates are compared over windows this long
	slowFraction = 0.5             // achieved below this fraction of the requested rate is slow
	busyFraction = 0.8             // an inference loop busy this much of a window is the bottleneck
	// While a thermal zone throttles, a pipeline below this fraction of
	// its requested rate says so with the zone: the clocks are slowed, so
	// a smaller shortfall than slowFraction is worth relating to it.
	throttledFraction = 0.9
)

// perfWatch measures a pipeline's frame rate window by window. The
// inference loop adds the time each frame takes (busy); the daemon's run
// goroutine reads the counters once per window.
type perfWatch struct {
	busyNs, frames atomic.Int64 // time in process and frames processed, written by the inference loop

	mu        sync.Mutex
	from      perfSample // start of the current window; zero: none yet
	slow      string     // why the rate is far below the request; "" while it is not
	throttled string     // "18 of 30 fps, gpu-thermal throttling at 98.5 °C" while below the request as the board throttles
}

type perfSample struct {
	t                         int64 // CLOCK_MONOTONIC ns
	captured, results, inferN uint64
	inferNs, busyNs, frames   int64
}

// processed records one frame through process.
func (w *perfWatch) processed(ns int64) { w.processedN(ns, 1) }

// processedN records a batch of n frames (a batched pipeline's).
func (w *perfWatch) processedN(ns int64, n int) {
	w.busyNs.Add(ns)
	w.frames.Add(int64(n))
}

func (p *pipeline) perfSample(now int64) perfSample {
	var captured uint64
	for _, l := range p.lanesOf() { // a batched pipeline: all its cameras
		captured += l.stats.captured.Load()
	}
	return perfSample{t: now, captured: captured, results: p.stats.results.Load(),
		inferN: p.stats.inferN.Load(), inferNs: p.stats.inferNs.Load(),
		busyNs: p.perf.busyNs.Load(), frames: p.perf.frames.Load()}
}

// slowness returns why the pipeline is far below its requested rate (""
// when it is not, or cannot be told yet) and whether that, or its relation
// to throttling, changed. throttle says which zones throttle now ("" when
// none: "gpu-thermal throttling at 98.5 °C"). It is called by the run
// goroutine; a window ends every perfWindow.
func (p *pipeline) slowness(now int64, throttle string) (why string, changed bool) {
	w := &p.perf
	w.mu.Lock()
	defer w.mu.Unlock()
	requested := p.requestedFPS()
	if requested <= 0 || pipelineState(p.state.Load()) != stateRunning {
		w.from = perfSample{} // waiting, or no rate asked for: start afresh
		changed = w.throttled != ""
		w.throttled = ""
		return w.slow, changed
	}
	if w.from.t == 0 {
		w.from = p.perfSample(now)
		return w.slow, false
	}
	if time.Duration(now-w.from.t) < perfWindow {
		return w.slow, false
	}
	to := p.perfSample(now)
	from := w.from
	w.from = to
	secs := float64(to.t-from.t) / 1e9
	achieved := float64(to.results-from.results) / secs
	if achieved < slowFraction*requested {
		var inferMs, frameMs float64
		if n := to.inferN - from.inferN; n > 0 {
			inferMs = float64(to.inferNs-from.inferNs) / float64(n) / 1e6
		}
		if n := to.frames - from.frames; n > 0 {
			frameMs = float64(to.busyNs-from.busyNs) / float64(n) / 1e6
		}
		why = slowReason(requested, achieved, float64(to.captured-from.captured)/secs,
			float64(to.busyNs-from.busyNs)/float64(to.t-from.t), frameMs, inferMs)
	}
	throttled := ""
	if throttle != "" && achieved < throttledFraction*requested {
		throttled = fmt.Sprintf("%.0f of %g fps, %s", achieved, requested, throttle)
	}
	changed = (why == "") != (w.slow == "") || (throttled == "") != (w.throttled == "")
	w.slow, w.throttled = why, throttled
	return why, changed
}

// requestedFPS is the results a second the pipeline's cameras ask for
// (0: one of them runs as fast as it can).
func (p *pipeline) requestedFPS() float64 {
	var fps float64
	for _, l := range p.lanesOf() {
		if l.scfg.FPS <= 0 {
			return 0
		}
		fps += l.scfg.FPS
	}
	return fps
}

// slowReason says why a pipeline achieves fewer results per second than
// requested. captured is the rate frames arrived at; busy is the fraction
// of the window the inference loop spent on frames, frameMs the time one
// frame took there, inferMs the inference's part of it.
func slowReason(requested, achieved, captured, busy, frameMs, inferMs float64) string {
	head := fmt.Sprintf("requested %g fps, achieved %.1f fps, because ", requested, achieved)
	if busy < busyFraction {
		// The inference loop waits for frames: they do not come.
		return head + fmt.Sprintf("the source delivers %.1f fps", captured)
	}
	if rest := frameMs - inferMs; rest > inferMs {
		return head + fmt.Sprintf("preprocessing and post-processing take %.1f ms per frame (inference %.1f ms)", rest, inferMs)
	}
	return head + fmt.Sprintf("inference takes %.1f ms per frame (the model allows at most %.1f fps here)", inferMs, 1000/inferMs)
}

// checkRates looks at every running pipeline's rate; a pipeline that
// becomes slow, or recovers, is logged and shows in STATUS=, and so is one
// below its requested rate while the board throttles.
func (d *daemon) checkRates() {
	g := d.currentGraph()
	now := monoNow()
	throttle := d.throttleNote()
	changed := false
	for _, p := range g.pipelines {
		wasSlow, wasThrottled := p.perfState()
		why, c := p.slowness(now, throttle)
		if !c {
			continue
		}
		changed = true
		slow, throttled := p.perfState()
		switch {
		case slow != wasSlow && why != "":
			p.log.Warn("pipeline far below its requested frame rate", "source", p.scfg.Name, "because", why)
		case slow != wasSlow:
			p.log.Info("pipeline back at its requested frame rate", "source", p.scfg.Name, "fps", p.scfg.FPS)
		}
		switch {
		case throttled != wasThrottled && throttled:
			p.log.Warn("pipeline below its requested frame rate while the board throttles", "source", p.scfg.Name, "rate", p.throttledStatus())
		case throttled != wasThrottled:
			p.log.Info("pipeline no longer below its requested frame rate while the board throttles", "source", p.scfg.Name)
		}
	}
	if changed {
		d.refreshStatus()
	}
}

// perfState says whether the pipeline is slow, and whether it is below
// its requested rate while the board throttles.
func (p *pipeline) perfState() (slow, throttled bool) {
	p.perf.mu.Lock()
	defer p.perf.mu.Unlock()
	return p.perf.slow != "", p.perf.throttled != ""
}

// throttledStatus is "18 of 30 fps, gpu-thermal throttling at 98.5 °C"
// while the pipeline is below its requested rate as the board throttles
// ("" otherwise).
func (p *pipeline) throttledStatus() string {
	p.perf.mu.Lock()
	defer p.perf.mu.Unlock()
	return p.perf.throttled
}

// slowStatus is the STATUS= addition of a slow pipeline ("" otherwise).
func (p *pipeline) slowStatus() string {
	p.perf.mu.Lock()
	defer p.perf.mu.Unlock()
	if p.perf.slow == "" {
		return ""
	}
	return " (SLOW: " + p.perf.slow + ")"
}

// rateMeter turns a counter into a rate between successive reads.
type rateMeter struct {
	mu    sync.Mutex
	lastN uint64
	lastT int64
	rate  float64
}

func (r *rateMeter) update(n uint64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := monoNow()
	if r.lastT != 0 {
		if dt := float64(now-r.lastT) / 1e9; dt >= 0.5 {
			r.rate = float64(n-r.lastN) / dt
			r.lastN, r.lastT = n, now
		}
	} else {
		r.lastN, r.lastT = n, now
	}
	return r.rate
}
