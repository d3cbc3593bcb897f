package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Every is how often a repeating line of one kind is written.
const Every = 10 * time.Second

// Limiter logs lines of each kind at most once per Every. The zero value
// is ready; it may be used from several goroutines.
type Limiter struct {
	mu    sync.Mutex
	kinds map[string]*kind
	now   func() time.Time // time.Now; tests replace it
}

type kind struct {
	last       time.Time
	suppressed int
}

// Log writes msg with args at level to l unless a line of the same kind
// was written less than Every ago; then it only counts it. The next line
// written carries the count as "suppressed".
func (r *Limiter) Log(l *slog.Logger, level slog.Level, kindName, msg string, args ...any) {
	r.mu.Lock()
	if r.kinds == nil {
		r.kinds = map[string]*kind{}
	}
	k := r.kinds[kindName]
	if k == nil {
		k = &kind{}
		r.kinds[kindName] = k
	}
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	if !k.last.IsZero() && now.Sub(k.last) < Every {
		k.suppressed++
		r.mu.Unlock()
		return
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.Log(context.Background(), level, msg, args...)
}
