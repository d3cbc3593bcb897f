package runtime

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// observedPipeline is a pipeline with only what observe touches, its
// histograms registered as the daemon's collector would export them.
func observedPipeline(tb testing.TB) (*pipeline, *prometheus.Registry) {
	p := &pipeline{met: newPipelineMetrics("bench", false)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.met.latency, p.met.inference, p.met.stages)
	return p, reg
}

// frameTimes are the stamps of frame i: 1–50 ms capture to result,
// 0.2–10 ms of inference, so the observations spread over many classic
// and native buckets.
func frameTimes(i int) (tCapture, tReady, tPre, tStarted, tInfer, tInferred, tResult int64) {
	tCapture = 1e12
	tReady = tCapture + 100_000 + int64(i%7)*20_000
	tPre = tReady + 50_000
	tStarted = tPre
	tInfer = tCapture + 500_000
	tInferred = tInfer + 200_000 + int64(i%50)*196_000
	tResult = tCapture + 1_000_000 + int64(i%50)*980_000
	return
}

// BenchmarkObserveFrame is the per-frame metrics work of a pipeline (what
// process does for each result: the counters and both histograms, classic
// and native buckets), with the histograms registered and scraped once
// before, as in the daemon.
func BenchmarkObserveFrame(b *testing.B) {
	p, reg := observedPipeline(b)
	for i := range 100 {
		p.observe(frameTimes(i))
	}
	if _, err := reg.Gather(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.observe(frameTimes(i))
		i++
	}
}

// TestObserveFrameAllocatesNothing: once a pipeline's histograms have seen
// its range of times, a frame's observation allocates nothing, before and
// after scrapes (a scrape swaps the histograms' hot and cold counts).
func TestObserveFrameAllocatesNothing(t *testing.T) {
	p, reg := observedPipeline(t)
	for round := range 3 {
		for i := range 100 {
			p.observe(frameTimes(i))
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			p.observe(frameTimes(i))
			i++
		})
		if allocs != 0 {
			t.Fatalf("round %d: %v allocations per observed frame", round, allocs)
		}
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.stats.results.Load(); n != 3*(100+1001) {
		t.Errorf("%d results counted, want %d", n, 3*(100+1001))
	}
}
