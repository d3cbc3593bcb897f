package batchtest

import (
	"sync"
	"time"

	"github.com/edged-dev/edged/runtime/batch"
)

// Clock is a batch.Clock that moves only on Advance. Its timers fire when
// Advance reaches their instant, or at once when Reset to one already past.
type Clock struct {
	mu     sync.Mutex
	now    int64
	timers []*timer
}

// NewClock makes a Clock at instant 1 s (0 is not a time a frame has).
func NewClock() *Clock { return &Clock{now: int64(time.Second)} }

// Now is the clock's instant in nanoseconds.
func (c *Clock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d and fires the timers that are due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += int64(d)
	for _, t := range c.timers {
		t.fireLocked(c.now)
	}
	c.mu.Unlock()
}

// Armed is how many timers are set and not fired.
func (c *Clock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.armed {
			n++
		}
	}
	return n
}

// NewTimer makes a stopped timer.
func (c *Clock) NewTimer() batch.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

type timer struct {
	c     *Clock
	ch    chan time.Time
	at    int64
	armed bool
}

func (t *timer) Reset(at int64) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	t.at, t.armed = at, true
	t.fireLocked(t.c.now)
}

func (t *timer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.armed = false
	t.drain()
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

func (t *timer) fireLocked(now int64) {
	if t.armed && now >= t.at {
		t.armed = false
		t.ch <- time.Time{}
	}
}
