package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// series1 makes n one-second samples: RSS, fds and goroutines from the given
// functions of the second, and a results counter that moves by 100 a
// second unless stuck says otherwise.
func series1(n int, rss, fds, gor func(i int) float64, stuck func(i int) bool) []Sample {
	out := make([]Sample, n)
	var total float64
	for i := range out {
		if stuck == nil || !stuck(i) {
			total += 100
		}
		out[i] = Sample{T: 1000 + float64(i), RSSMiB: rss(i), FDs: fds(i), Goroutines: gor(i), ResultsTotal: total}
	}
	return out
}

func constant(v float64) func(int) float64 { return func(int) float64 { return v } }

// ramp goes linearly from a at second 0 to b at second n-1.
func ramp(a, b float64, n int) func(int) float64 {
	return func(i int) float64 { return a + (b-a)*float64(i)/float64(n-1) }
}

// step is a before second at, b from it on.
func step(a, b float64, at int) func(int) float64 {
	return func(i int) float64 {
		if i < at {
			return a
		}
		return b
	}
}

func TestJudge(t *testing.T) {
	const n = 600 // a 10-minute soak: first window 60-180 s, last 479-599 s
	flatRSS, flatFDs, flatGor := constant(100), constant(30), constant(40)
	cases := []struct {
		name    string
		samples []Sample
		fail    []string // checks that must fail; all others must pass
		detail  string   // in the first failing check's detail
	}{
		{name: "flat", samples: series1(n, flatRSS, flatFDs, flatGor, nil)},
		{name: "noisy but flat: clients come and go, one spike mid-run",
			samples: series1(n, func(i int) float64 { return 100 + float64(i%7) }, func(i int) float64 { return 30 + float64(i%5)*2 },
				func(i int) float64 {
					if i == 300 {
						return 500
					}
					return 40 + float64(i%9)*3
				}, nil)},
		{name: "growth only during the warm-up", samples: series1(n, func(i int) float64 { return math.Min(50+float64(i), 110) }, step(10, 30, 40), step(10, 40, 50), nil)},
		{name: "RSS leaks 30 MiB over 100", samples: series1(n, ramp(100, 130, n), flatFDs, flatGor, nil), fail: []string{"rss"}, detail: "allowed +20"},
		{name: "RSS +25 MiB over 200 is within 15 %", samples: series1(n, step(200, 225, 300), flatFDs, flatGor, nil)},
		{name: "RSS +35 MiB over 200 is not", samples: series1(n, step(200, 235, 300), flatFDs, flatGor, nil), fail: []string{"rss"}, detail: "allowed +30"},
		{name: "RSS +20 MiB over 50 is the floor", samples: series1(n, step(50, 70, 300), flatFDs, flatGor, nil)},
		{name: "RSS +21 MiB over 50", samples: series1(n, step(50, 71, 300), flatFDs, flatGor, nil), fail: []string{"rss"}},
		{name: "fds +8", samples: series1(n, flatRSS, step(30, 38, 300), flatGor, nil)},
		{name: "fds +9", samples: series1(n, flatRSS, step(30, 39, 300), flatGor, nil), fail: []string{"fds"}, detail: "30 → 39 fds"},
		{name: "one fd per replug, 20 replugs", samples: series1(n, flatRSS, func(i int) float64 { return 30 + float64(i/30) }, flatGor, nil), fail: []string{"fds"}},
		{name: "goroutines +20", samples: series1(n, flatRSS, flatFDs, step(40, 60, 300), nil)},
		{name: "goroutines +21", samples: series1(n, flatRSS, flatFDs, step(40, 61, 300), nil), fail: []string{"goroutines"}},
		{name: "everything leaks", samples: series1(n, ramp(100, 200, n), ramp(30, 100, n), ramp(40, 400, n), nil), fail: []string{"rss", "fds", "goroutines"}},
		{name: "results stop for 5 s", samples: series1(n, flatRSS, flatFDs, flatGor, func(i int) bool { return i > 300 && i < 305 })},
		{name: "results stop for 6 s", samples: series1(n, flatRSS, flatFDs, flatGor, func(i int) bool { return i > 300 && i < 306 }), fail: []string{"results"}, detail: "6.0 s (from t=300 s"},
		{name: "results stop at the end", samples: series1(n, flatRSS, flatFDs, flatGor, func(i int) bool { return i > 590 }), fail: []string{"results"}},
		{name: "no window has enough samples", samples: series1(4, flatRSS, flatFDs, flatGor, nil), fail: []string{"rss", "fds", "goroutines"}, detail: "too few samples"},
		{name: "goroutines never scraped", samples: series1(n, flatRSS, flatFDs, constant(math.NaN()), nil), fail: []string{"goroutines"}, detail: "too few samples"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checks := Judge(c.samples, DefaultTolerances)
			if len(checks) != 4 {
				t.Fatalf("%d checks: %+v", len(checks), checks)
			}
			var failed []string
			for _, ck := range checks {
				if !ck.OK {
					failed = append(failed, ck.Name)
				}
			}
			if strings.Join(failed, ",") != strings.Join(c.fail, ",") {
				for _, ck := range checks {
					t.Logf("%-10s ok=%v %s", ck.Name, ck.OK, ck.Detail)
				}
				t.Fatalf("failed %v, want %v", failed, c.fail)
			}
			if c.detail != "" {
				for _, ck := range checks {
					if !ck.OK && !strings.Contains(ck.Detail, c.detail) {
						t.Errorf("%s: detail %q lacks %q", ck.Name, ck.Detail, c.detail)
					}
					if !ck.OK {
						break
					}
				}
			}
		})
	}
}

func TestJudgeWindows(t *testing.T) {
	first, last := DefaultTolerances.Windows(600)
	if first != [2]float64{60, 180} || last != [2]float64{480, 600} {
		t.Fatalf("windows %v %v", first, last)
	}
	// Samples only inside the windows count: a leak that is repaired
	// before the last window passes, one that starts in it fails.
	s := series1(600, func(i int) float64 {
		if i > 200 && i < 400 {
			return 500
		}
		return 100
	}, constant(30), constant(40), nil)
	if c := Judge(s, DefaultTolerances)[0]; !c.OK || c.First != 100 || c.Last != 100 {
		t.Errorf("between the windows: %+v", c)
	}
	s = series1(600, step(100, 150, 500), constant(30), constant(40), nil)
	if c := Judge(s, DefaultTolerances)[0]; c.OK || c.Last != 150 {
		t.Errorf("in the last window: %+v", c)
	}
}

func TestLongestStall(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name   string
		totals []float64
		want   float64
	}{
		{"moving", []float64{1, 2, 3, 4}, 1},
		{"counter restarts from 0 (SIGHUP restarted the pipeline)", []float64{100, 200, 3, 50}, 1},
		{"stuck 3 s", []float64{1, 2, 2, 2, 2, 3}, 4},
		{"unreadable counts as stuck", []float64{1, nan, nan, nan, 5}, 4},
		{"stuck to the end", []float64{1, 2, 2, 2}, 2},
		{"one sample", []float64{7}, 0},
	}
	for _, c := range cases {
		s := make([]Sample, len(c.totals))
		for i, v := range c.totals {
			s[i] = Sample{T: float64(i), ResultsTotal: v}
		}
		if got, _ := LongestStall(s); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMedianAndRate(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("median of nothing")
	}
	if r := Rate(100, 300, 2); r != 100 {
		t.Errorf("rate %v", r)
	}
	if r := Rate(1000, 50, 1); r != 50 {
		t.Errorf("rate after a restart %v", r)
	}
}

func TestParseMetrics(t *testing.T) {
	text := "# HELP edged_goroutines x\n# TYPE edged_goroutines gauge\nedged_goroutines 42\n" +
		`edged_engine_info{pipeline="soak",model="demo",generation="7",sha256="0085b3a424d0",backend="onnxruntime"} 1` + "\n" +
		`edged_engine_reloads_total{model="demo",result="ok"} 5` + "\n" +
		`edged_engine_reloads_total{model="demo",result="invalid"} 2` + "\n" +
		`edged_build_info{version="v\"1",go="go1.26.8",arch="amd64"} 1` + "\n"
	ser, err := parseMetrics([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	m := &metrics{series: ser}
	if v := m.get("edged_goroutines"); v != 42 {
		t.Errorf("goroutines %v", v)
	}
	if e := m.find("edged_engine_info", "pipeline", "soak"); e == nil || e.labels["sha256"] != "0085b3a424d0" || e.labels["generation"] != "7" {
		t.Errorf("engine_info %+v", e)
	}
	if v := m.sum("edged_engine_reloads_total", func(l map[string]string) bool { return l["result"] != "ok" }); v != 2 {
		t.Errorf("rejections %v", v)
	}
	if e := m.find("edged_build_info"); e == nil || e.labels["version"] != `v"1` {
		t.Errorf("quoted label %+v", e)
	}
	if !math.IsNaN(m.get("edged_nope")) {
		t.Error("a missing series is not NaN")
	}
}

func TestSlope(t *testing.T) {
	s := series1(600, ramp(100, 110, 600), constant(30), step(40, 1000, 30), nil)
	// 10 MiB over 599 s is 60.1 MiB/h.
	if got := Slope(s, 60, func(x Sample) float64 { return x.RSSMiB }); math.Abs(got-3600*10/599.0) > 1e-6 {
		t.Errorf("RSS slope %v", got)
	}
	if got := Slope(s, 60, func(x Sample) float64 { return x.FDs }); got != 0 {
		t.Errorf("fds slope %v", got)
	}
	// The step at 30 s is before from: flat.
	if got := Slope(s, 60, func(x Sample) float64 { return x.Goroutines }); got != 0 {
		t.Errorf("goroutines slope %v", got)
	}
	if got := Slope(s[:2], 0, func(x Sample) float64 { return x.FDs }); !math.IsNaN(got) {
		t.Errorf("two points: %v", got)
	}
}

// TestMonitorEvents: a 72-hour soak sees more status events than the
// monitor keeps; the checks still find the first event after a time, and
// the counts cover every event.
func TestMonitorEvents(t *testing.T) {
	m := newMonitor("")
	t0 := time.Unix(1000, 0)
	n := 3*maxEvents + 7
	for i := 0; i < n; i++ {
		name := "engine_reloaded"
		if i%10 == 9 {
			name = "engine_rejected"
		}
		m.addEvent(event{at: t0.Add(time.Duration(i) * time.Second), name: name, sha: fmt.Sprint(i)})
	}
	if len(m.events) > maxEvents {
		t.Fatalf("%d events kept", len(m.events))
	}
	c := m.eventCounts()
	if c["engine_reloaded"]+c["engine_rejected"] != n || c["engine_rejected"] != n/10 {
		t.Errorf("counts %v", c)
	}
	at := t0.Add(time.Duration(n-25) * time.Second)
	want := n - 24
	for want%10 != 9 {
		want++
	}
	if e, ok := m.firstEvent("engine_rejected", "", at); !ok || e.sha != fmt.Sprint(want) {
		t.Errorf("first rejection after %d: %+v %v", n-25, e, ok)
	}
	if _, ok := m.firstEvent("config_reloaded", "", t0); ok {
		t.Error("found an event never sent")
	}
	if !m.sawSHA(fmt.Sprint(n-1), at) || m.sawSHA(fmt.Sprint(n-30), at) {
		t.Error("sawSHA")
	}
}
