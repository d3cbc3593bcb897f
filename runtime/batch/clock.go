package batch

import (
	"time"

	"golang.org/x/sys/unix"
)

// Clock is the time a Batcher waits by: nanoseconds of a monotonic clock,
// and a timer that fires at one of its instants.
type Clock interface {
	Now() int64
	NewTimer() Timer
}

// Timer fires once at the instant of its last Reset (at once when that has
// passed), on C. Stop and Reset leave no stale firing on C.
type Timer interface {
	Reset(at int64)
	Stop()
	C() <-chan time.Time
}

// System is CLOCK_MONOTONIC, the clock of frames and latencies.
type System struct{}

// Now is CLOCK_MONOTONIC in nanoseconds.
func (System) Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// NewTimer makes a stopped timer.
func (System) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return sysTimer{t}
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) Reset(at int64)      { s.t.Reset(time.Duration(at - System{}.Now())) }
func (s sysTimer) Stop()               { s.t.Stop() }
func (s sysTimer) C() <-chan time.Time { return s.t.C }
