package main

import (
	"encoding/binary"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors/replay"
)

// testInputs writes the inputs once per test binary: one noisy frame, and
// a stalled recording of 100 fps for 30 ms (4 frames, then the stall).
func testInputs(t *testing.T) inputs {
	t.Helper()
	in, err := writeInputs(t.TempDir(), 1, 0, 100, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestConfigs: every way's configuration is valid edged configuration
// with n cameras on one model file (own: n [[model]] tables on it); the
// memory plan counts each camera's pool as the bound assumes (poolBytes)
// and the model once when shared, n times when own. The batched way is
// checked once runtime/config has sources = [...].
func TestConfigs(t *testing.T) {
	in := testInputs(t)
	_, batched := reflect.TypeOf(config.Pipeline{}).FieldByName("Sources")
	for _, way := range []string{wayOwn, wayShared, wayBatched} {
		if way == wayBatched && !batched {
			t.Logf("runtime/config has no sources = [...] yet: the batched way is not checked")
			continue
		}
		for _, n := range []int{1, 8} {
			for _, ph := range []string{phasePaced, phaseSaturation, phaseStalled} {
				c := caseSpec{Way: way, N: n, Phase: ph, FPS: 15, Wait: 2 * time.Millisecond, Threads: 1}
				text := configText(c, in, "/tmp/x.sock", "")
				cfg, err := config.Parse(c.name()+".toml", []byte(text))
				if err != nil {
					t.Fatalf("%s: %v\n%s", c.name(), err, text)
				}
				models := map[string]int{wayOwn: n, wayShared: 1, wayBatched: 1}[way]
				if len(cfg.Sources) != n || len(cfg.Models) != models {
					t.Fatalf("%s: %d sources, %d models", c.name(), len(cfg.Sources), len(cfg.Models))
				}
				for i, sc := range cfg.Sources {
					stalled := ph == phaseStalled && i == n-1
					if (sc.Path == in.Stalled) != stalled || sc.FreeRun != (ph == phaseSaturation) || sc.Loop == stalled {
						t.Errorf("%s: camera %d: path %s, free_run %v, loop %v", c.name(), i, sc.Path, sc.FreeRun, sc.Loop)
					}
				}
				for _, pc := range cfg.Pipelines {
					if (pc.Schedule == "queue") != (ph == phaseSaturation) {
						t.Errorf("%s: pipeline %s: schedule %s", c.name(), pc.Name, pc.Schedule)
					}
				}
				if way == wayBatched {
					continue
				}
				// A slot of the recording's frame, as edged check sizes it.
				sizes := func(_ *config.Pipeline, sc *config.Source) (int, int64) {
					b, err := os.ReadFile(sc.Path)
					if err != nil {
						t.Fatal(err)
					}
					h, err := replay.ParseHeader(b)
					if err != nil {
						t.Fatal(err)
					}
					return h.Format.FrameSize(), 0
				}
				needs := runtime.PlanMemory(cfg, sizes, false).Needs
				if len(needs) != n {
					t.Fatalf("%s: %d memory needs", c.name(), len(needs))
				}
				for i, need := range needs {
					if ph != phaseSaturation && need.PoolBytes() != poolBytes {
						t.Errorf("%s: pipeline %d: pool %d bytes, the bound assumes %d", c.name(), i, need.PoolBytes(), poolBytes)
					}
					if shared := need.SharedWith != ""; shared != (way == wayShared && i > 0) {
						t.Errorf("%s: pipeline %d shared with %q", c.name(), i, need.SharedWith)
					}
				}
			}
		}
	}
}

// TestStalledRecording: the stalled camera's recording plays at its fps
// for stall-after and then has one frame due an hour later.
func TestStalledRecording(t *testing.T) {
	in := testInputs(t)
	b, err := os.ReadFile(in.Stalled)
	if err != nil {
		t.Fatal(err)
	}
	h, err := replay.ParseHeader(b)
	if err != nil || h.Format.Width != width || h.Format.Height != height {
		t.Fatalf("header %+v, %v", h, err)
	}
	var deltas []time.Duration
	for off := 32; off < len(b); {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		deltas = append(deltas, time.Duration(binary.LittleEndian.Uint64(b[off+8:])))
		if n != frameBytes {
			t.Fatalf("frame %d: %d bytes", len(deltas), n)
		}
		off += 16 + n
	}
	want := []time.Duration{0, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, time.Hour}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas %v, want %v", deltas, want)
	}
}

// TestSummarise: the window's results per camera (by source, else by
// pipeline), frames replaced by frame_seq gaps (one at the window's start
// counts: the record before it was read), percentiles by nearest rank.
func TestSummarise(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rec := func(ms int, pipeline, source string, seq uint64, total int64, batch int) record {
		r := record{Type: "result", Pipeline: pipeline, Source: source, FrameSeq: seq, at: at(ms)}
		r.Latency, r.Engine.Batch = map[string]int64{"pre": total / 2, "total": total}, batch
		return r
	}
	all := []record{
		rec(-10, "p0", "", 1, 999, 1), // before the window
		rec(10, "p0", "", 3, 100, 1),  // one replaced
		rec(20, "p0", "", 4, 200, 1),
		rec(30, "batched", "cam1", 7, 300, 2),
		rec(40, "batched", "cam1", 8, 400, 2),
		rec(2000, "p0", "", 9, 5000, 1), // after it
	}
	r := &runResult{WindowS: 1}
	r.summarise(all, t0, at(1000))
	if r.Results != 4 || r.Replaced != 1 || r.ResultsPS != 4 || r.MeanBatch != 1.5 {
		t.Errorf("results %d, replaced %d, %v/s, batch %v", r.Results, r.Replaced, r.ResultsPS, r.MeanBatch)
	}
	if r.Stages["total"] != 250 || r.Stages["pre"] != 125 {
		t.Errorf("stage means %v", r.Stages)
	}
	if c := r.Cameras["cam0"]; c.Results != 2 || c.P50us != 100 || c.P99us != 200 || c.LastS != 2 {
		t.Errorf("cam0 %+v", c)
	}
	if c := r.Cameras["cam1"]; c.Results != 2 || c.P99us != 400 {
		t.Errorf("cam1 %+v", c)
	}
	if p := r.pooled(50, all2); p != 200 {
		t.Errorf("pooled p50 %v, want 200", p)
	}
	if p := r.pooled(99, func(cam string) bool { return cam == "cam0" }); p != 200 {
		t.Errorf("cam0's p99 %v", p)
	}
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(100 - i)
	}
	if p50, p99, p100 := percentile(v, 50), percentile(v, 99), percentile(v, 100); p50 != 50 || p99 != 99 || p100 != 100 {
		t.Errorf("percentiles %v %v %v", p50, p99, p100)
	}
	if !math.IsNaN(percentile(nil, 99)) {
		t.Error("the percentile of nothing is a number")
	}
}

func all2(string) bool { return true }

// TestBounds: the report's exit code says whether the shared memory bound
// and the fairness bound hold.
func TestBounds(t *testing.T) {
	run := func(way string, n int, phase string, rss int64, totals map[string][]int64) *runResult {
		return &runResult{Case: caseSpec{Way: way, N: n, Phase: phase, Wait: 2 * time.Millisecond}, WindowS: 1, RSS: rss, Totals: totals,
			Cameras: map[string]camStat{}}
	}
	steady := map[string][]int64{"cam0": {1000, 1000}, "cam1": {1000, 1000}}
	for _, c := range []struct {
		name        string
		grow        int64 // RSS(2) - RSS(1), shared
		stalledP99  int64 // cam0's, µs
		code        int
		wantInPrint string
	}{
		{"both hold", poolBytes, 1000, 0, "holds"},
		{"memory over", poolBytes * 12 / 10, 1000, 1, "does not hold"},
		{"fairness over", poolBytes, 3001, 1, "does not hold"},
		{"fairness within the wait", poolBytes, 3000, 0, "holds"},
	} {
		// The own way's figures are a reference: over both bounds, and
		// the code does not change.
		rep := &report{Counts: []int{1, 2}, Ways: []string{wayOwn, wayBatched}, PoolBytes: poolBytes, FPS: 15}
		rep.Runs = []*runResult{
			run(wayBatched, 1, phasePaced, 100<<20, map[string][]int64{"cam0": {1000}}),
			run(wayBatched, 2, phasePaced, 100<<20+c.grow, steady),
			run(wayBatched, 2, phaseStalled, 0, map[string][]int64{"cam0": {c.stalledP99}}),
			run(wayOwn, 1, phasePaced, 100<<20, map[string][]int64{"cam0": {1000}}),
			run(wayOwn, 2, phasePaced, 300<<20, steady),
			run(wayOwn, 2, phaseStalled, 0, map[string][]int64{"cam0": {5000}}),
		}
		var b strings.Builder
		if code := rep.markdown(&b); code != c.code || !strings.Contains(b.String(), c.wantInPrint) {
			t.Errorf("%s: code %d, want %d:\n%s", c.name, code, c.code, b.String())
		}
	}
}

func TestParseComputeApps(t *testing.T) {
	csv := "4242, 512\n77, 100\n4242, 10\n"
	if n, err := parseComputeApps(csv, 4242); err != nil || n != 522<<20 {
		t.Errorf("%d, %v", n, err)
	}
	if n, err := parseComputeApps("", 4242); err != nil || n != 0 {
		t.Errorf("no apps: %d, %v", n, err)
	}
	if _, err := parseComputeApps("4242, [N/A]\n", 4242); err == nil {
		t.Error("[N/A] accepted")
	}
}
