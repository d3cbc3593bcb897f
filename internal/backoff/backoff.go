package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is a retry schedule: the delay before retry n (0-based) is drawn
// from [d/2, d], where d = Min·2ⁿ capped at Max. Reset is how long a run
// (of what a Retry restarts) must last to count as healthy; see Retry.
type Policy struct {
	Min, Max time.Duration
	Reset    time.Duration
}

// Restart is the policy of a source or serial sensor that failed or went
// away, and of the serial sink's port: 100 ms doubling to a 2 s cap, so a
// replugged camera or adapter is found again within 2 s of appearing,
// while a failed open of an absent device costs one syscall. A run must
// last 10 s to clear the failures: a device that opens and fails at once,
// over and over, is restarted at most about once a second.
var Restart = Policy{Min: 100 * time.Millisecond, Max: 2 * time.Second, Reset: 10 * time.Second}

// Retry paces the restarts of something that runs until it fails (a
// source, a port, a connection): a start that fails and a run that ends
// less than Policy.Reset after it began are both failures, and each makes
// the next start wait longer (Policy.Delay of the failures so far); only a
// run that lasted Reset clears them, and the next start after it is at
// once. So an open that succeeds and a read that fails at once cannot
// turn into a restart loop with no delay. A Retry is used by one
// goroutine; its zero value with a Policy is ready.
type Retry struct {
	Policy   Policy
	failures int
	began    time.Time
}

// Failed records a start that failed and returns how long to wait
// before the next.
func (r *Retry) Failed() time.Duration {
	d := r.Policy.Delay(r.failures)
	r.failures++
	r.began = time.Time{}
	return d
}

// Started records a start that succeeded: a run begins.
func (r *Retry) Started() { r.began = time.Now() }

// Ended records the end of the run Started began (a failure, a loss) and
// returns how long to wait before the next start: 0 after a run of at
// least Reset (the failures are cleared), else as Failed.
func (r *Retry) Ended() time.Duration {
	if r.Stable() {
		r.failures, r.began = 0, time.Time{}
		return 0
	}
	return r.Failed()
}

// Stable reports whether a run is going on and has lasted Reset.
func (r *Retry) Stable() bool {
	return !r.began.IsZero() && time.Since(r.began) >= r.Policy.Reset
}

// Failures is how many failures (failed starts and short runs) came since
// the last healthy run.
func (r *Retry) Failures() int { return r.failures }

// Delay returns the delay before retry n (n < 0 counts as 0): drawn
// from the upper half of Min doubled n times, capped at Max.
func (p Policy) Delay(n int) time.Duration {
	d := p.ceiling(n)
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(rand.Int64N(int64(d)/2+1))
}

// ceiling is the longest delay before retry n.
func (p Policy) ceiling(n int) time.Duration {
	d := max(p.Min, 0)
	for i := 0; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// MostAttempts is the most attempts a span of window can hold under p:
// the first at once, then one after each wait, every wait the shortest
// Delay can draw (half its ceiling). It is what a test may bound a retry
// loop's attempts by; a Policy that need not wait holds any number
// (math.MaxInt).
func (p Policy) MostAttempts(window time.Duration) int {
	if p.ceiling(0)/2 <= 0 {
		return math.MaxInt
	}
	n, at := 1, time.Duration(0)
	for i := 0; ; i++ {
		if at += p.ceiling(i) / 2; at > window {
			return n
		}
		n++
	}
}

// Sleep waits d, or until ctx is done; it reports whether the whole d
// passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
