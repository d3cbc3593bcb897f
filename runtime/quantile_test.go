package runtime

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLatencyQuantiles: p50 and p99 read from the latency histogram's
// buckets are within a bucket's width (native buckets: 9 %) of the true
// quantiles, over the whole histogram and over the difference of two
// readings (the page's window): what came before the window does not
// count. The classic buckets give the same within theirs.
func TestLatencyQuantiles(t *testing.T) {
	m := newPipelineMetrics("p", false)
	for i := 0; i < 1000; i++ { // 1..1000 ms before the window
		m.latency.Observe(float64(i+1) / 1000)
	}
	early := readBuckets(m.latency)
	if !early.native {
		t.Fatal("the latency histogram has no native buckets")
	}
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol*want {
			t.Errorf("%s = %.4f, want %.4f ± %.0f %%", what, got, want, 100*tol)
		}
	}
	near("p50 of 1..1000 ms", early.quantile(0.5), 0.5, 0.09)
	near("p99 of 1..1000 ms", early.quantile(0.99), 0.99, 0.09)
	for i := 0; i < 1000; i++ { // the window: 10..20 ms
		m.latency.Observe(0.010 + float64(i)/1000*0.010)
	}
	w := readBuckets(m.latency).minus(early)
	if w.count != 1000 {
		t.Fatalf("the window counted %d", w.count)
	}
	near("p50 of the window", w.quantile(0.5), 0.015, 0.09)
	near("p99 of the window", w.quantile(0.99), 0.0199, 0.09)

	classic := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: latencyBuckets})
	for i := 0; i < 1000; i++ {
		classic.Observe(0.010 + float64(i)/1000*0.010)
	}
	c := readBuckets(classic)
	if c.native {
		t.Fatal("a classic histogram read as native")
	}
	near("classic p50", c.quantile(0.5), 0.015, 0.15)
	if (buckets{}).quantile(0.5) != 0 {
		t.Error("an empty reading has a quantile")
	}
}
