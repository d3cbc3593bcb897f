package runtime

import (
	"time"

	"github.com/edged-dev/edged/internal/backoff"
)

// flapRuns is how many runs in a row that ended before they were stable
// (backoff.Restart.Reset) make a source flapping: its source_up waits until
// a run is stable.
const flapRuns = 2

// restarts is what the goroutine that supervises a source (a camera's
// capture loop, a serial sensor's loop) keeps about restarting it: how
// long to wait before the next start, and what to announce.
//
// Every restart path backs off: a start that fails and a run that ends
// within backoff.Restart.Reset of its start both make the next start wait
// longer (100 ms doubling to 2 s); only a run that lasted Reset clears
// that. And a source that fails over and over is announced once, not per
// restart: source_down goes out when a source that was announced up ends,
// source_up when it starts again, except while it flaps (flapRuns short
// runs in a row), when source_up waits until a run has been stable, and
// the failures in between are only logged, at most once per 10 s. A
// client sees at most down, up, down, up, down for an episode of any
// length, then up once it is over.
type restarts struct {
	retry   backoff.Retry
	downOut bool // a source_down is out and no source_up since
	short   int  // runs in a row that ended before they were stable
	upDue   bool // started while flapping: source_up waits for a stable run
	errs    rateLog
}

func (r *restarts) init() {
	if r.retry.Policy == (backoff.Policy{}) {
		r.retry.Policy = backoff.Restart
	}
}

// startFailed records a failed start; it returns how long to wait.
func (r *restarts) startFailed() time.Duration {
	r.init()
	return r.retry.Failed()
}

// started records a start that succeeded and reports whether source_up
// is to be announced now.
func (r *restarts) started() bool {
	r.init()
	r.retry.Started()
	if !r.downOut {
		return false
	}
	if r.short >= flapRuns {
		r.upDue = true
		return false
	}
	r.downOut = false
	return true
}

// delivering is called for every frame or sample; it reports whether a
// source_up held back while the source flapped is due now (the run has
// become stable).
func (r *restarts) delivering() bool {
	if !r.upDue || !r.retry.Stable() {
		return false
	}
	r.upDue, r.downOut, r.short = false, false, 0
	return true
}

// ended records the end of a run; it reports whether source_down is to be
// announced and how long to wait before the next start.
func (r *restarts) ended() (announce bool, wait time.Duration) {
	r.init()
	if r.retry.Stable() {
		r.short = 0
	} else {
		r.short++
	}
	announce = !r.downOut
	r.downOut, r.upDue = true, false
	return announce, r.retry.Ended()
}
