package main

import (
	"context"
	"sync"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
)

// event is a status record the monitor received.
type event struct {
	at     time.Time
	name   string // engine_reloaded, engine_rejected, source_down, ...
	source string
	sha    string
	reason string
}

// monitor is one client that stays connected for the whole soak and reads
// every record: which engine computed the results, the status events, and
// when a result last carried a sensor sample. If edged cuts it off it
// connects again (and counts that).
type monitor struct {
	sock string

	mu         sync.Mutex
	results    int64
	missed     uint64 // records lost to seq gaps (the monitor read too slowly)
	connects   int
	lastResult time.Time
	lastSensor time.Time            // last result carrying an "imu" sample
	lastOf     map[string]time.Time // pipeline -> its last result
	shaSeen    map[string]time.Time // engine SHA-256 prefix -> last result it computed
	events     []event              // the latest, at most maxEvents
	counts     map[string]int       // every status event, by name
}

// maxEvents bounds the events kept for the churn's checks, which only look
// at the last minute; a 72-hour soak sees a few hundred thousand.
const maxEvents = 20_000

func newMonitor(sock string) *monitor {
	return &monitor{sock: sock, shaSeen: map[string]time.Time{}, counts: map[string]int{}, lastOf: map[string]time.Time{}}
}

func (m *monitor) run(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := stream.Dial(ctx, m.sock, nil)
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		m.mu.Lock()
		m.connects++
		m.mu.Unlock()
		var msg stream.Message
		for {
			if err := c.Next(&msg); err != nil {
				break
			}
			now := time.Now()
			r := &msg.Rec
			m.mu.Lock()
			m.missed += msg.Missed
			switch r.Type {
			case "result":
				m.results++
				m.lastResult = now
				m.lastOf[r.Pipeline] = now
				if r.Engine != nil {
					m.shaSeen[r.Engine.SHA256] = now
				}
				for _, s := range r.Sensors {
					if s.Sensor == "imu" {
						m.lastSensor = now
					}
				}
			case "status":
				e := event{at: now, name: r.Event, source: r.Source, reason: r.Reason}
				if r.Engine != nil {
					e.sha = r.Engine.SHA256
				}
				m.addEvent(e)
			}
			m.mu.Unlock()
		}
		c.Close()
	}
}

// addEvent keeps e (dropping the older half of the events when full) and
// counts it; m.mu is held.
func (m *monitor) addEvent(e event) {
	if len(m.events) >= maxEvents {
		m.events = append(m.events[:0], m.events[maxEvents/2:]...)
	}
	m.events = append(m.events, e)
	m.counts[e.name]++
}

// sawSHA reports whether a result computed by the engine with this SHA-256
// prefix, or its engine_reloaded record, arrived after t.
func (m *monitor) sawSHA(sha string, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shaSeen[sha].After(t) {
		return true
	}
	for i := len(m.events) - 1; i >= 0 && m.events[i].at.After(t); i-- {
		if e := m.events[i]; e.name == "engine_reloaded" && e.sha == sha {
			return true
		}
	}
	return false
}

// firstEvent returns the first event called name (and about source, when
// source is not "") after t.
func (m *monitor) firstEvent(name, source string, t time.Time) (event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var first event
	found := false
	for i := len(m.events) - 1; i >= 0 && m.events[i].at.After(t); i-- {
		if e := m.events[i]; e.name == name && (source == "" || e.source == source) {
			first, found = e, true
		}
	}
	return first, found
}

// received returns the results read plus the records lost to seq gaps.
func (m *monitor) received() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results + int64(m.missed)
}

// resultOfAfter reports whether a result of the pipeline arrived after t.
func (m *monitor) resultOfAfter(pipeline string, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastOf[pipeline].After(t)
}

func (m *monitor) sensorAfter(t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastSensor.After(t)
}

// eventCounts counts the status events by name.
func (m *monitor) eventCounts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := make(map[string]int, len(m.counts))
	for k, v := range m.counts {
		n[k] = v
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitUntil polls cond every 100 ms until it holds (true), timeout passes
// or ctx is done (false).
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, 100*time.Millisecond) {
			return cond()
		}
	}
}
