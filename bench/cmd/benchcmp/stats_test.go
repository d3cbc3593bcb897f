package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	s := make([]float64, 100)
	for i := range s {
		s[i] = float64(i + 1) // 1..100
	}
	for _, c := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0, 1}} {
		if got := percentile(s, c.p); got != c.want {
			t.Errorf("p%g of 1..100 = %g, want %g", c.p, got, c.want)
		}
	}
	if got := percentile([]float64{3, 7}, 50); got != 3 {
		t.Errorf("p50 of {3,7} = %g, want 3 (nearest rank)", got)
	}
	if got := percentile([]float64{3, 7}, 99); got != 7 {
		t.Errorf("p99 of {3,7} = %g, want 7", got)
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("p50 of nothing is not NaN")
	}
	d := distOf([]float64{5, 1, 4, 2, 3})
	if d.N != 5 || d.P50 != 3 || d.P99 != 5 || d.Mean != 3 || d.Max != 5 {
		t.Errorf("distOf = %+v", d)
	}
}

func TestOverheadPerRecord(t *testing.T) {
	lines := []string{
		`{"type":"result","seq":1,"latency_us":{"pre":10,"infer":100,"post":1,"total":120}}`,
		`{"type":"result","seq":2,"latency_us":{"pre":10,"infer":1000,"post":1,"total":1030}}`,
		`{"type":"result","seq":3,"latency_us":{"pre":10,"infer":5,"post":1,"total":60}}`,
		`{"type":"result","seq":4,"latency_us":{"pre":0,"fill":7,"total":9}}`, // no infer: no overhead
	}
	var recs []record
	for _, l := range lines {
		r, err := parseRecord([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	d := stageDists(recs)
	// Per record: 20, 30, 55. The difference of the percentiles would be
	// p50(total) 120 - p50(infer) 100 = 20, which is not the p50 overhead.
	if o := d[Overhead]; o.N != 3 || o.P50 != 30 || o.Max != 55 {
		t.Errorf("overhead %+v, want n 3, p50 30, max 55", o)
	}
	// A stage present as 0 counts; an absent one does not.
	if p := d["pre"]; p.N != 4 || p.P50 != 10 {
		t.Errorf("pre %+v, want n 4 p50 10", p)
	}
	if f := d["fill"]; f.N != 1 || f.P50 != 7 {
		t.Errorf("fill %+v, want n 1", f)
	}
	if _, ok := d["queue"]; ok {
		t.Error("queue is in no record but has a distribution")
	}
	if _, err := parseRecord([]byte(`{"seq":1}`)); err == nil {
		t.Error("a record without type was accepted")
	}
	if _, err := parseRecord([]byte(`{"type":"result","latency_us":{"pre":"x"}}`)); err == nil {
		t.Error("a non-numeric latency was accepted")
	}
}

func TestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	res := func(seq uint64) record { return record{Type: "result", Seq: seq} }
	all := []arrival{
		{at(0), res(1)},
		{at(10), res(2)}, // window starts at 10
		{at(20), record{Type: "status", Seq: 3}},
		{at(30), res(4)},
		{at(40), res(7)},  // 5 and 6 lost
		{at(50), res(8)},  // window ends before 50
		{at(60), res(12)}, // outside: its gap is not counted
	}
	recs, lost := window(all, at(10), at(50))
	if len(recs) != 3 || lost != 2 {
		t.Errorf("%d results, %d lost; want 3 results (status excluded), 2 lost", len(recs), lost)
	}
	// A gap right at the window's start counts: the record before it was read.
	if _, lost := window([]arrival{{at(0), res(1)}, {at(10), res(4)}}, at(5), at(20)); lost != 2 {
		t.Errorf("lost %d at the window start, want 2", lost)
	}
}

func TestCompareRatiosAndGoals(t *testing.T) {
	run := func(side, phase string, st map[string]float64, thr float64) *RunResult {
		r := &RunResult{Side: side, Phase: phase, Input: "noisy-1920x1080", Throughput: thr, Stages: map[string]Dist{}}
		for k, v := range st {
			r.Stages[k] = Dist{N: 10, P50: v, P99: 2 * v}
		}
		return r
	}
	rep := &Report{Mode: "e2e", Inputs: []Input{{Name: "noisy-1920x1080", Width: 1920, Height: 1080}}, Runs: []*RunResult{
		run("edged", "saturation", map[string]float64{"pre": 900, "infer": 1000, "total": 9000, Overhead: 8000}, 500),
		run("edged", "paced", map[string]float64{"pre": 400, "infer": 1000, "total": 1500, Overhead: 500}, 250),
		run("python", "saturation", map[string]float64{"fill": 300, "pre": 2100, "infer": 1000, "total": 3600, Overhead: 2600}, 280),
		run("python", "paced", map[string]float64{"fill": 300, "pre": 2000, "infer": 1000, "total": 3500, Overhead: 2500}, 140),
	}}
	rep.compare()
	c := rep.Comparisons[0]
	if r := c.Row("overhead p50"); r == nil || r.Ratio == nil || *r.Ratio != 0.2 {
		t.Fatalf("overhead p50 row %+v: want the paced runs' 500 / 2500", r)
	}
	if r := c.Row("throughput at saturation"); *r.Edged != 500 || *r.Python != 280 {
		t.Errorf("throughput from the saturation runs: %+v", r)
	}
	if r := c.Row("total p50 at saturation"); *r.Edged != 9000 || *r.Python != 3600 {
		t.Errorf("total at saturation from the saturation runs: %+v", r)
	}
	if r := c.Row("fill p50"); r.Edged != nil || r.Ratio != nil {
		t.Errorf("fill is absent on edged's side, got %+v", r)
	}
	pass := map[string]bool{}
	for _, g := range rep.Goals {
		pass[strings.Fields(g.Goal)[0]] = g.Pass
	}
	if !pass["overhead"] || !pass["throughput"] || !pass["preprocessing"] {
		t.Errorf("goals %+v: all three pass (0.2, 1.79, 0.2)", rep.Goals)
	}
	rep.Mode, rep.Comparisons = "pre", nil
	rep.compare()
	if r := rep.Comparisons[0].Row("throughput at saturation"); r.Comparable || r.Ratio != nil {
		t.Errorf("pre mode compares throughput: %+v", r)
	}
	if len(rep.Goals) != 1 {
		t.Errorf("pre mode has %d goals, want the preprocessing one", len(rep.Goals))
	}
}

func TestMedianRun(t *testing.T) {
	mk := func(p50, thr float64, withFill bool) *RunResult {
		r := &RunResult{Side: "python", Results: 10, Throughput: thr, Stages: map[string]Dist{"pre": {N: 10, P50: p50, P99: 2 * p50, Max: 3 * p50}}}
		if withFill {
			r.Stages["fill"] = Dist{N: 10, P50: p50 / 10}
		}
		return r
	}
	runs := []*RunResult{mk(10, 1, true), mk(30, 3, false), mk(20, 2, true)}
	m := medianRun(runs)
	if d := m.Stages["pre"]; d.P50 != 20 || d.P99 != 40 || d.N != 30 || d.Max != 90 {
		t.Errorf("pre %+v: want p50 20, p99 40, n 30, max 90", d)
	}
	if m.Throughput != 2 || m.Results != 30 {
		t.Errorf("throughput %g results %d, want 2 and 30", m.Throughput, m.Results)
	}
	// fill is in two runs: the median of {1, 2} is 1.5, not diluted by the third.
	if d := m.Stages["fill"]; d.P50 != 1.5 || d.N != 20 {
		t.Errorf("fill %+v: want p50 1.5 over 20", d)
	}
	if runs[0].Stages["pre"].P50 != 10 || medianRun(runs[:1]) != runs[0] || medianRun(nil) != nil {
		t.Error("medianRun changed its input or folded a single run")
	}
}
