package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is a retry schedule: the delay before retry n (0-based) is drawn
// from [d/2, d], where d = Min·2ⁿ capped at Max.
type Policy struct {
	Min, Max time.Duration
}

// Restart is the policy of a source or serial sensor that failed or went
// away, and of the serial sink's port: 100 ms doubling to a 2 s cap, so a
// replugged camera or adapter is found again within 2 s of appearing,
// while a failed open of an absent device costs one syscall.
var Restart = Policy{Min: 100 * time.Millisecond, Max: 2 * time.Second}

// Delay returns the delay before retry n (n < 0 counts as 0).
func (p Policy) Delay(n int) time.Duration {
	d := max(p.Min, 0)
	for i := 0; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(rand.Int64N(int64(d)/2+1))
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
