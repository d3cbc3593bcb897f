package board

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/board/boardtest"
)

// recorder keeps what a monitor reports.
type recorder struct {
	mu       sync.Mutex
	events   []Event
	problems []Problem
}

func (r *recorder) event(e Event)     { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }
func (r *recorder) problem(p Problem) { r.mu.Lock(); r.problems = append(r.problems, p); r.mu.Unlock() }

// take returns the events since the last take, as "kind source: reason".
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Kind, e.Source, e.Reason))
	}
	r.events = nil
	return out
}

// stepped is a monitor whose cycles the test runs itself: its goroutine's
// interval is an hour, so only Start's read and the test's cycle calls
// read the board.
func stepped(t *testing.T, tr *boardtest.Tree) (*Monitor, *recorder) {
	t.Helper()
	rec := &recorder{}
	m := New(Options{Paths: Paths(tr.Paths), Interval: time.Hour, Events: rec.event, Problems: rec.problem})
	m.Start()
	t.Cleanup(func() { m.Close() })
	return m, rec
}

func expectEvents(t *testing.T, step string, rec *recorder, want ...string) {
	t.Helper()
	got := rec.take()
	if len(got) != len(want) {
		t.Errorf("%s: events %q, want %d like %q", step, got, len(want), want)
		return
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("%s: event %q, want %q…", step, got[i], want[i])
		}
	}
}

// TestZoneCrossesItsTripPointAndCools: gpu-thermal of an Orin (passive trip
// point 99 °C) heats up to it, throttles, stays throttling while it cools
// less than 5 °C, is ok once 5 °C below, and throttles again when it comes
// back: one event for each change, the status says which zone and how hot.
func TestZoneCrossesItsTripPointAndCools(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	m, rec := stepped(t, tr)
	expectEvents(t, "start", rec)
	const gpu = 1 // thermal_zone1: gpu-thermal
	for _, step := range []struct {
		celsius    float64
		want       []string
		throttling string
	}{
		{98.9, nil, ""},
		{99.0, []string{"thermal_throttle gpu-thermal: gpu-thermal at 99.0 °C, at or above its first passive trip point (99.0 °C)"}, "gpu-thermal throttling at 99.0 °C"},
		{101.5, nil, "gpu-thermal throttling at 101.5 °C"},
		{94.1, nil, "gpu-thermal throttling at 94.1 °C"},
		{94.0, []string{"thermal_ok gpu-thermal: gpu-thermal at 94.0 °C, 5 °C or more below its first passive trip point (99.0 °C)"}, ""},
		{98.5, nil, ""},
		{99.5, []string{"thermal_throttle gpu-thermal: gpu-thermal at 99.5 °C"}, "gpu-thermal throttling at 99.5 °C"},
	} {
		tr.SetTemp(gpu, step.celsius)
		m.cycle()
		name := fmt.Sprintf("%.1f °C", step.celsius)
		expectEvents(t, name, rec, step.want...)
		st := m.Status()
		got := ""
		if len(st.Throttling) > 0 {
			got = st.Throttling[0].String()
		}
		if got != step.throttling || len(st.Throttling) > 1 {
			t.Errorf("%s: throttling %v, want %q", name, st.Throttling, step.throttling)
		}
	}
}

// TestZoneAlreadyHotAtStart: a board that is throttling when edged starts
// says so with the first reading.
func TestZoneAlreadyHotAtStart(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP5)
	tr.SetTemp(8, 100.25) // tj-therm
	m, rec := stepped(t, tr)
	expectEvents(t, "start", rec, "thermal_throttle tj-therm: tj-therm at 100.2 °C")
	if st := m.Status(); len(st.Throttling) != 1 || st.Throttling[0].Trip != 99 {
		t.Errorf("status %+v", st)
	}
}

// TestUnsetPassiveTripIgnored: x86_pkg_temp's passive trip point reads 0
// (never set): 45 °C there is not throttling.
func TestUnsetPassiveTripIgnored(t *testing.T) {
	m, rec := stepped(t, boardtest.Copy(t, boardtest.X86))
	expectEvents(t, "start", rec)
	if st := m.Status(); len(st.Throttling) > 0 || st.Mode.Known {
		t.Errorf("status %+v", st)
	}
}

// TestFileDisappears: a zone's temperature, the rails' folder and the
// power mode's status file go away and come back: their readings leave the
// snapshot (and the metrics) and return, a throttling zone that cannot be
// read keeps its state, and nothing is a problem.
func TestFileDisappears(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	tr.SetTemp(1, 100)
	m, rec := stepped(t, tr)
	expectEvents(t, "start", rec, "thermal_throttle gpu-thermal")

	tr.Remove("sys/class/thermal/thermal_zone1/temp")
	tr.Remove("sys/bus/i2c/drivers/ina3221")
	tr.Remove("root/var/lib/nvpmodel/status")
	m.cycle()
	s := m.Snapshot()
	if s.Zones[1].HasTemp || len(s.Rails) != 0 || s.Mode.Known {
		t.Errorf("after the files went: %v", describe(*s))
	}
	if st := m.Status(); len(st.Throttling) != 1 || !st.Mode.Known {
		t.Errorf("the last state should be kept: %+v", st)
	}
	tr.SetTemp(1, 50)
	tr.Write("sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/in1_label", "VDD_IN")
	tr.Write("sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/in1_input", "5000")
	tr.Write("sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input", "1000")
	tr.SetPowerMode(0)
	m.cycle()
	expectEvents(t, "back", rec, "thermal_ok gpu-thermal")
	s = m.Snapshot()
	if !s.Zones[1].HasTemp || len(s.Rails) != 1 || s.Rails[0].Watts != 5 || !s.Mode.Known {
		t.Errorf("after the files came back: %v", describe(*s))
	}
	if len(rec.problems) > 0 {
		t.Errorf("missing files are not problems: %v", rec.problems)
	}
}

// TestProblemsReportedOnce: a garbage value and an unreadable file are
// reported once each, however many cycles read them.
func TestProblemsReportedOnce(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.XavierJP5)
	tr.Write("sys/class/thermal/thermal_zone0/temp", "NaN")
	tr.Unreadable("proc/meminfo")
	m, _ := stepped(t, tr)
	rec := &recorder{}
	m.opts.Problems = rec.problem
	m.reported = map[string]bool{}
	for range 5 {
		m.cycle()
	}
	if len(rec.problems) != 2 {
		t.Fatalf("problems %v, want 2", rec.problems)
	}
	for _, p := range rec.problems {
		if !strings.HasSuffix(p.Path, "thermal_zone0/temp") && !strings.HasSuffix(p.Path, "proc/meminfo") {
			t.Errorf("unexpected %v", p)
		}
	}
}

// TestPowerModeChanged: nvpmodel -m 2 rewrites the status file; the next
// reading reports the change with both modes' names.
func TestPowerModeChanged(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	m, rec := stepped(t, tr)
	tr.SetPowerMode(2)
	m.cycle()
	expectEvents(t, "mode 2", rec, "power_mode_changed MAXN_SUPER: power mode MAXN_SUPER (mode 2), was 15W (mode 0)")
	m.cycle()
	expectEvents(t, "unchanged", rec)
	tr.SetPowerMode(9) // a mode the configuration does not name
	m.cycle()
	expectEvents(t, "mode 9", rec, "power_mode_changed 9: power mode mode 9, was MAXN_SUPER (mode 2)")
	if st := m.Status(); !st.Mode.Known || st.Mode.ID != 9 || ModeLabel(st.Mode) != "mode 9" {
		t.Errorf("status %+v", st.Mode)
	}
}

// TestMemoryPressure: MemAvailable falling below 10 % of MemTotal is
// pressure until it is back above 15 %; so is PSI's stall share at 10 %
// or more, until it is below 5 %.
func TestMemoryPressure(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.X86)
	m, rec := stepped(t, tr)
	meminfo := func(availPercent int) {
		tr.Write("proc/meminfo", fmt.Sprintf("MemTotal: 1000000 kB\nMemFree: 1000 kB\nMemAvailable: %d kB\n", availPercent*10000))
	}
	psi := func(avg10 string) {
		tr.Write("proc/pressure/memory", "some avg10="+avg10+" avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0")
	}
	for _, step := range []struct {
		avail    int
		avg10    string
		want     []string
		pressure bool
	}{
		{50, "0.00", nil, false},
		{9, "0.00", []string{"memory_pressure : MemAvailable 88 MiB, 9.0 % of 977 MiB; tasks waited for memory 0 % of the last 10 s (PSI)"}, true},
		{14, "0.00", nil, true},
		{16, "0.00", []string{"memory_ok : MemAvailable 156 MiB, 16.0 % of 977 MiB"}, false},
		{50, "12.00", []string{"memory_pressure : MemAvailable 488 MiB, 50.0 % of 977 MiB; tasks waited for memory 12 % of the last 10 s (PSI)"}, true},
		{50, "6.00", nil, true},
		{50, "4.99", []string{"memory_ok "}, false},
	} {
		meminfo(step.avail)
		psi(step.avg10)
		m.cycle()
		name := fmt.Sprintf("%d %% available, PSI %s", step.avail, step.avg10)
		expectEvents(t, name, rec, step.want...)
		if st := m.Status(); (st.Pressure != "") != step.pressure {
			t.Errorf("%s: status pressure %q", name, st.Pressure)
		}
	}
}

// TestMonitorGoroutine: the monitor's own goroutine reads every interval
// (a zone that heats up is reported without anyone calling it), and Close
// stops it, is idempotent, and works before Start and without it.
func TestMonitorGoroutine(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	events := make(chan Event, 16)
	m := New(Options{Paths: Paths(tr.Paths), Interval: 10 * time.Millisecond, Events: func(e Event) { events <- e }})
	m.Start()
	m.Start() // a second Start does nothing
	tr.SetTemp(0, 105)
	select {
	case e := <-events:
		if e.Kind != EventThermalThrottle || e.Source != "cpu-thermal" {
			t.Errorf("event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event from the monitor's goroutine")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	n := len(events)
	tr.SetTemp(0, 40)
	time.Sleep(50 * time.Millisecond)
	if len(events) != n {
		t.Error("the monitor read after Close")
	}

	idle := New(Options{Paths: Paths(tr.Paths)})
	idle.Close()
	idle.Start() // after Close: reads nothing
	if idle.Snapshot() != nil {
		t.Error("Start after Close read the board")
	}
	New(Options{}).Close()
}
