package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logEvery is how often a repeating log line of one kind is written.
const logEvery = 10 * time.Second

// rateLog logs the first line of each kind, then at most one per logEvery
// carrying how many were suppressed since the last (as runtime's rateLog
// does for pipeline errors), so that a peer, however fast it connects or
// sends requests, cannot flood the journal. The counts are in /metrics.
type rateLog struct {
	mu    sync.Mutex
	kinds map[string]*rateKind
}

type rateKind struct {
	last       time.Time
	suppressed int
}

func (r *rateLog) log(l *slog.Logger, level slog.Level, kind, msg string, args ...any) {
	r.mu.Lock()
	if r.kinds == nil {
		r.kinds = map[string]*rateKind{}
	}
	k := r.kinds[kind]
	if k == nil {
		k = &rateKind{}
		r.kinds[kind] = k
	}
	now := time.Now()
	if !k.last.IsZero() && now.Sub(k.last) < logEvery {
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

const (
	logInfo = slog.LevelInfo
	logWarn = slog.LevelWarn
)
