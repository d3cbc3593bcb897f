package board

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often a Monitor reads the board: thermal zones
// are polled by the kernel every second or so, and a read cycle costs
// tens to hundreds of file reads.
const DefaultInterval = 2 * time.Second

// The thresholds of the status events (docs/PROTOCOL.md).
const (
	// ThermalHysteresis: a throttling zone is ok again once it is this
	// many °C below its first passive trip point.
	ThermalHysteresis = 5.0
	// Memory pressure begins when MemAvailable falls below
	// PressureAvailable of MemTotal, or when PSI says tasks waited for
	// memory PressureStall of the last 10 s or more; it ends when
	// MemAvailable is back above PressureAvailableOK and the stall below
	// PressureStallOK.
	PressureAvailable   = 0.10
	PressureAvailableOK = 0.15
	PressureStall       = 0.10
	PressureStallOK     = 0.05
)

// The events a Monitor reports: the status records' event names.
const (
	EventThermalThrottle  = "thermal_throttle"
	EventThermalOK        = "thermal_ok"
	EventPowerModeChanged = "power_mode_changed"
	EventMemoryPressure   = "memory_pressure"
	EventMemoryOK         = "memory_ok"
)

// Event is a change of the board's state.
type Event struct {
	Kind   string // one of the Event constants
	Source string // the zone, or the new power mode's name; "" for memory
	Reason string // what a person reads
}

// Throttle is a zone at or above its first passive trip point.
type Throttle struct {
	Zone          string
	Celsius, Trip float64
}

// String is how the status line says it: "gpu-thermal throttling at
// 98.5 °C".
func (t Throttle) String() string { return fmt.Sprintf("%s throttling at %.1f °C", t.Zone, t.Celsius) }

// Status is what the Monitor makes of the board now.
type Status struct {
	Throttling []Throttle // the most over its trip point first
	Mode       PowerMode  // Known is false when there is no nvpmodel
	// Pressure says why memory is under pressure; "" when it is not.
	Pressure string
}

// Options configure a Monitor.
type Options struct {
	Paths    Paths
	Interval time.Duration // 0: DefaultInterval
	// Events receives the board's status events, on the monitor's
	// goroutine; nil drops them.
	Events func(Event)
	// Problems receives each file that cannot be read or does not parse,
	// once per file for the monitor's life; nil drops them.
	Problems func(Problem)
}

// Monitor reads the board every Interval on a goroutine it owns, from
// Start until Close.
type Monitor struct {
	opts   Options
	reader *Reader
	snap   atomic.Pointer[Snapshot]

	mu      sync.Mutex
	status  Status
	started bool

	// The goroutine's own state.
	throttling  map[string]Throttle
	lastMode    PowerMode
	pressure    bool
	pressureWhy string
	reported    map[string]bool

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

// New returns a monitor that reads nothing until Start.
func New(opts Options) *Monitor {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	return &Monitor{
		opts:       opts,
		reader:     NewReader(opts.Paths),
		throttling: map[string]Throttle{},
		reported:   map[string]bool{},
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// Start reads the board once (its events and problems are reported before
// Start returns), then every Interval until Close. A second Start, or one
// after Close, does nothing.
func (m *Monitor) Start() {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return
	}
	m.started = true
	m.mu.Unlock()
	select {
	case <-m.stop:
		close(m.done)
		return
	default:
	}
	m.cycle()
	go m.loop()
}

func (m *Monitor) loop() {
	defer close(m.done)
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.cycle()
		}
	}
}

// Close stops the goroutine and waits for it (a read cycle in progress
// finishes first). It is idempotent.
func (m *Monitor) Close() error {
	m.closeOnce.Do(func() { close(m.stop) })
	m.mu.Lock()
	started := m.started
	m.mu.Unlock()
	if started {
		<-m.done
	}
	return nil
}

// Snapshot is the latest read cycle (nil before Start). It is shared: do
// not modify it.
func (m *Monitor) Snapshot() *Snapshot { return m.snap.Load() }

// Status is what the latest read cycle means.
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	s.Throttling = slices.Clone(s.Throttling)
	return s
}

// Paths returns where the monitor reads.
func (m *Monitor) Paths() Paths { return m.reader.Paths() }

// cycle reads the board once and reports what changed.
func (m *Monitor) cycle() {
	snap, problems := m.reader.Read()
	for _, p := range problems {
		if m.reported[p.Path] {
			continue
		}
		m.reported[p.Path] = true
		if m.opts.Problems != nil {
			m.opts.Problems(p)
		}
	}
	m.snap.Store(&snap)
	var events []Event
	events = m.thermal(&snap, events)
	events = m.powerMode(&snap, events)
	events = m.memory(&snap, events)

	st := Status{Mode: m.lastMode}
	if m.pressure {
		st.Pressure = m.pressureWhy
	}
	for _, t := range m.throttling {
		st.Throttling = append(st.Throttling, t)
	}
	slices.SortFunc(st.Throttling, func(a, b Throttle) int {
		if d := (b.Celsius - b.Trip) - (a.Celsius - a.Trip); d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Zone, b.Zone)
	})
	st.Mode.Modes = slices.Clone(st.Mode.Modes)
	m.mu.Lock()
	m.status = st
	m.mu.Unlock()
	if m.opts.Events != nil {
		for _, e := range events {
			m.opts.Events(e)
		}
	}
}

// thermal tracks every zone with a passive trip point: throttling from
// the first reading at or above it until one ThermalHysteresis below it.
// A zone that cannot be read keeps its state.
func (m *Monitor) thermal(s *Snapshot, events []Event) []Event {
	for _, z := range s.Zones {
		trip, has := z.Passive()
		if !has || !z.HasTemp {
			continue
		}
		t, throttling := m.throttling[z.Name]
		switch {
		case !throttling && z.Celsius >= trip:
			m.throttling[z.Name] = Throttle{Zone: z.Name, Celsius: z.Celsius, Trip: trip}
			events = append(events, Event{Kind: EventThermalThrottle, Source: z.Name,
				Reason: fmt.Sprintf("%s at %.1f °C, at or above its first passive trip point (%.1f °C): the kernel slows the clocks", z.Name, z.Celsius, trip)})
		case throttling && z.Celsius <= trip-ThermalHysteresis:
			delete(m.throttling, z.Name)
			events = append(events, Event{Kind: EventThermalOK, Source: z.Name,
				Reason: fmt.Sprintf("%s at %.1f °C, %.0f °C or more below its first passive trip point (%.1f °C)", z.Name, z.Celsius, ThermalHysteresis, trip)})
		case throttling:
			t.Celsius, t.Trip = z.Celsius, trip
			m.throttling[z.Name] = t
		}
	}
	return events
}

// powerMode reports a change of nvpmodel's mode (not the first reading).
func (m *Monitor) powerMode(s *Snapshot, events []Event) []Event {
	if !s.Mode.Known {
		return events
	}
	if m.lastMode.Known && m.lastMode.ID != s.Mode.ID {
		events = append(events, Event{Kind: EventPowerModeChanged, Source: ModeName(s.Mode),
			Reason: fmt.Sprintf("power mode %s, was %s", ModeLabel(s.Mode), ModeLabel(m.lastMode))})
	}
	m.lastMode = s.Mode
	return events
}

// memory reports memory pressure beginning and ending (with hysteresis).
func (m *Monitor) memory(s *Snapshot, events []Event) []Event {
	pressed, why := underPressure(s.Memory, m.pressure)
	m.pressureWhy = why
	switch {
	case pressed && !m.pressure:
		events = append(events, Event{Kind: EventMemoryPressure, Reason: why})
	case !pressed && m.pressure:
		events = append(events, Event{Kind: EventMemoryOK, Reason: why})
	}
	m.pressure = pressed
	return events
}

// underPressure decides whether memory is under pressure, and says what
// was read; was is the state so far (leaving it takes lower numbers than
// entering it).
func underPressure(mem Memory, was bool) (pressed bool, why string) {
	availLimit, stallLimit := PressureAvailable, PressureStall
	if was {
		availLimit, stallLimit = PressureAvailableOK, PressureStallOK
	}
	var parts []string
	if mem.HasMeminfo && mem.Total > 0 {
		share := float64(mem.Available) / float64(mem.Total)
		pressed = share < availLimit
		parts = append(parts, fmt.Sprintf("MemAvailable %s, %.1f %% of %s", formatBytes(mem.Available), 100*share, formatBytes(mem.Total)))
	}
	if mem.HasPressure {
		pressed = pressed || mem.Pressure >= stallLimit
		parts = append(parts, fmt.Sprintf("tasks waited for memory %.0f %% of the last 10 s (PSI)", 100*mem.Pressure))
	}
	return pressed, strings.Join(parts, "; ")
}

// ModeName is the name of a power mode, or its number when the
// configuration does not name it.
func ModeName(p PowerMode) string {
	if p.Name != "" {
		return p.Name
	}
	return fmt.Sprint(p.ID)
}

// ModeLabel says a power mode as a person reads it: "MAXN (mode 0)".
func ModeLabel(p PowerMode) string {
	if p.Name != "" {
		return fmt.Sprintf("%s (mode %d)", p.Name, p.ID)
	}
	return fmt.Sprintf("mode %d", p.ID)
}

// formatBytes says a size in MiB or GiB.
func formatBytes(b uint64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.0f GiB", float64(b)/(1<<30))
	}
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}
