package main

import (
	"fmt"
	"math"
	"sort"
)

// Sample is one second of the soak as the sampler saw it. A value that
// could not be read is NaN.
type Sample struct {
	T            float64 // seconds since edged was ready
	RSSMiB       float64 // VmRSS of /proc/PID/status
	FDs          float64 // entries of /proc/PID/fd
	Goroutines   float64 // edged_goroutines from /metrics
	ResultsTotal float64 // edged_results_total of the pipeline (it restarts from 0 when a SIGHUP restarts the pipeline)
	ResultsPerS  float64 // from ResultsTotal and the previous sample
}

// Tolerances are the limits of Judge; DefaultTolerances documents them.
type Tolerances struct {
	Warmup     float64 // fraction of the run ignored at the start
	Window     float64 // fraction of the run each compared window spans
	RSSFrac    float64 // RSS may grow by the larger of RSSFrac × the first median ...
	RSSMiB     float64 // ... and RSSMiB
	FDs        float64 // open fds may grow by this many
	Goroutines float64 // goroutines may grow by this many
	MaxStall   float64 // seconds without a new result
	MinSamples int     // samples each window needs to be judged at all
}

// DefaultTolerances: the medians of the last 20 % of the run against those
// of the 20 % after a 10 % warm-up. Medians, so that clients that happen to
// be connected at a sample (each holds an fd and two or three goroutines)
// and the allocator's steps do not decide; a leak of one fd or goroutine
// per client, reload or replug shows as a growth of tens to hundreds over
// a 10-minute soak, far above these.
var DefaultTolerances = Tolerances{
	Warmup: 0.10, Window: 0.20,
	RSSFrac: 0.15, RSSMiB: 20,
	FDs: 8, Goroutines: 20,
	MaxStall:   5,
	MinSamples: 5,
}

// Check is one line of the verdict.
type Check struct {
	Name        string     `json:"name"`
	OK          bool       `json:"ok"`
	First       float64    `json:"first"`   // median of the first window (flatness checks)
	Last        float64    `json:"last"`    // median of the last window
	Growth      float64    `json:"growth"`  // Last - First
	Allowed     float64    `json:"allowed"` // the largest growth (or stall) that passes
	Unit        string     `json:"unit"`
	Detail      string     `json:"detail"`
	FirstWindow [2]float64 `json:"first_window_s"` // seconds from the first sample
	LastWindow  [2]float64 `json:"last_window_s"`
}

// Windows returns the compared time windows of a run of span seconds:
// [warm-up end, warm-up end + window) and [span - window, span].
func (tol Tolerances) Windows(span float64) (first, last [2]float64) {
	w0 := tol.Warmup * span
	return [2]float64{w0, w0 + tol.Window*span}, [2]float64{span - tol.Window*span, span}
}

// Judge decides whether RSS, open fds and goroutines stayed flat and
// whether results kept flowing. The run spans from the first to the last
// sample's T. It is a pure function of its arguments.
func Judge(samples []Sample, tol Tolerances) []Check {
	if len(samples) == 0 {
		return []Check{{Name: "samples", Detail: "no samples"}}
	}
	t0, span := samples[0].T, samples[len(samples)-1].T-samples[0].T
	first, last := tol.Windows(span)
	flat := func(name, unit string, get func(Sample) float64, allowed func(first float64) float64) Check {
		c := Check{Name: name, Unit: unit, FirstWindow: first, LastWindow: last}
		var a, b []float64
		for _, s := range samples {
			v, t := get(s), s.T-t0
			if math.IsNaN(v) {
				continue
			}
			if t >= first[0] && t < first[1] {
				a = append(a, v)
			}
			if t >= last[0] && t <= last[1] {
				b = append(b, v)
			}
		}
		if len(a) < tol.MinSamples || len(b) < tol.MinSamples {
			c.First, c.Last = math.NaN(), math.NaN()
			c.Detail = fmt.Sprintf("too few samples to judge (%d in the first window, %d in the last; %d needed)", len(a), len(b), tol.MinSamples)
			return c
		}
		c.First, c.Last = Median(a), Median(b)
		c.Growth, c.Allowed = c.Last-c.First, allowed(c.First)
		c.OK = c.Growth <= c.Allowed
		c.Detail = fmt.Sprintf("median %s → %s %s (%+.4g; allowed %+.4g)", fmtV(c.First), fmtV(c.Last), unit, c.Growth, c.Allowed)
		return c
	}
	checks := []Check{
		flat("rss", "MiB", func(s Sample) float64 { return s.RSSMiB }, func(f float64) float64 { return math.Max(tol.RSSFrac*f, tol.RSSMiB) }),
		flat("fds", "fds", func(s Sample) float64 { return s.FDs }, func(float64) float64 { return tol.FDs }),
		flat("goroutines", "goroutines", func(s Sample) float64 { return s.Goroutines }, func(float64) float64 { return tol.Goroutines }),
	}
	stall, at := LongestStall(samples)
	c := Check{Name: "results", Unit: "s", Growth: stall, Allowed: tol.MaxStall, OK: stall <= tol.MaxStall}
	c.Detail = fmt.Sprintf("longest stretch without a new result %.1f s (from t=%.0f s; allowed %.0f s)", stall, at-t0, tol.MaxStall)
	return append(checks, c)
}

// Slope is the least-squares slope of get over the samples at or after
// from seconds (from the first sample), per hour; NaN with fewer than 3
// points. Reported beside the verdict: a growth that passes over 10
// minutes may still be a trend over 72 hours.
func Slope(samples []Sample, from float64, get func(Sample) float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		x, y := s.T-samples[0].T, get(s)
		if x < from || math.IsNaN(y) {
			continue
		}
		n++
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if n < 3 || d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d * 3600
}

// LongestStall returns the longest time from a sample at which the results
// counter had moved (or the first sample) to a later sample without a move
// in between, and when that stretch began; a stretch still open at the last
// sample counts up to it. A counter that goes back (the pipeline restarted
// and counts from 0 again) has moved; an unreadable one (NaN) has not.
func LongestStall(samples []Sample) (stall, from float64) {
	if len(samples) == 0 {
		return 0, 0
	}
	lastMove, prev := samples[0].T, samples[0].ResultsTotal
	from = lastMove
	for _, s := range samples[1:] {
		moved := !math.IsNaN(s.ResultsTotal) && (math.IsNaN(prev) || s.ResultsTotal != prev)
		if !math.IsNaN(s.ResultsTotal) {
			prev = s.ResultsTotal
		}
		if d := s.T - lastMove; d > stall {
			stall, from = d, lastMove
		}
		if moved {
			lastMove = s.T
		}
	}
	return stall, from
}

// Rate returns the results per second between two counter readings dt
// seconds apart; a counter that went back restarted from 0.
func Rate(prev, cur, dt float64) float64 {
	if math.IsNaN(prev) || math.IsNaN(cur) || dt <= 0 {
		return math.NaN()
	}
	d := cur - prev
	if d < 0 {
		d = cur
	}
	return d / dt
}

// Median of the values (NaN for none); it sorts a copy.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func fmtV(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e6 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
