package lifetime

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/edged-dev/edged/sensors/internal/ctxmerge"
)

// ErrStopped is returned by Wait when Stop ends the run.
var ErrStopped = errors.New("lifetime: stopped")

// Lifetime is one run of a source at a time. The zero value is ready for
// Begin; a stopped Lifetime may Begin again.
type Lifetime struct {
	stopMu sync.Mutex // guards stop only, so Stop never waits for the source's lock
	stop   context.CancelFunc

	ctx    context.Context
	merger *ctxmerge.Merger
	timer  *time.Timer
}

// Begin starts a run.
func (l *Lifetime) Begin() {
	ctx, stop := context.WithCancel(context.Background())
	l.stopMu.Lock()
	l.stop = stop
	l.stopMu.Unlock()
	l.ctx = ctx
	l.merger = ctxmerge.New(ctx, nil)
	if l.timer == nil {
		l.timer = time.NewTimer(time.Hour)
	}
	l.timer.Stop()
}

// Stop ends the run, waking Wait and whatever waits on a Context. It may be
// called from any goroutine, at any time, any number of times.
func (l *Lifetime) Stop() {
	l.stopMu.Lock()
	stop := l.stop
	l.stopMu.Unlock()
	if stop != nil {
		stop()
	}
}

// Stopped reports whether the current run has been stopped.
func (l *Lifetime) Stopped() bool { return l.ctx != nil && l.ctx.Err() != nil }

// Context returns ctx merged with the run: it ends when either does.
func (l *Lifetime) Context(ctx context.Context) context.Context { return l.merger.Context(ctx) }

// Wait sleeps for d. It returns ctx.Err() when ctx ends first and
// ErrStopped when the run is stopped first; d <= 0 returns at once.
func (l *Lifetime) Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	l.timer.Reset(d)
	select {
	case <-l.timer.C:
		return nil
	case <-ctx.Done():
		l.timer.Stop()
		return ctx.Err()
	case <-l.ctx.Done():
		l.timer.Stop()
		return ErrStopped
	}
}

// End releases what the run holds; it follows Stop.
func (l *Lifetime) End() {
	l.merger.Release()
	l.timer.Stop()
}
