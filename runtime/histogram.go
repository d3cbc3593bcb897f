package runtime

import (
	"math"
	"sync"
	"sync/atomic"
)

// histogram counts durations (nanoseconds) in exponential buckets without
// locks or allocation; quantiles are read from bucket upper bounds.
type histogram struct {
	buckets [histBuckets]atomic.Uint64
	count   atomic.Uint64
	sum     atomic.Int64
}

// Bucket i holds values up to histBase * 2^(i/4): 10 µs .. ~20 s in 84 steps.
const (
	histBuckets = 84
	histBase    = 10_000 // ns
)

func histBound(i int) float64 { return histBase * math.Pow(2, float64(i)/4) }

func (h *histogram) observe(ns int64) {
	i := 0
	if ns > histBase {
		i = int(math.Ceil(4 * math.Log2(float64(ns)/histBase)))
		if i >= histBuckets {
			i = histBuckets - 1
		}
	}
	h.buckets[i].Add(1)
	h.count.Add(1)
	h.sum.Add(ns)
}

// quantile returns the upper bound (ns) of the bucket holding quantile q.
func (h *histogram) quantile(q float64) float64 {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var acc uint64
	for i := range h.buckets {
		acc += h.buckets[i].Load()
		if acc >= rank {
			return histBound(i)
		}
	}
	return histBound(histBuckets - 1)
}

// rateMeter turns a counter into a rate between successive reads.
type rateMeter struct {
	mu    sync.Mutex
	lastN uint64
	lastT int64
	rate  float64
}

func (r *rateMeter) update(n uint64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := monoNow()
	if r.lastT != 0 {
		if dt := float64(now-r.lastT) / 1e9; dt >= 0.5 {
			r.rate = float64(n-r.lastN) / dt
			r.lastN, r.lastT = n, now
		}
	} else {
		r.lastN, r.lastT = n, now
	}
	return r.rate
}
