package runtime

import (
	"math"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// buckets is a histogram's counts by bucket, read from its native
// (exponential) buckets where it has them, else from its classic ones:
// enough to take a quantile over the difference of two readings, as
// Prometheus's histogram_quantile does over a range.
type buckets struct {
	count  uint64
	native bool
	schema int32
	zero   uint64           // native: observations at or below the zero threshold
	counts map[int32]uint64 // native: bucket index -> count (not cumulative)
	bounds []float64        // classic: upper bounds, ascending
	cum    []uint64         // classic: cumulative counts
}

// readBuckets reads h now.
func readBuckets(h prometheus.Histogram) buckets {
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return buckets{}
	}
	hh := m.Histogram
	b := buckets{count: hh.GetSampleCount()}
	if len(hh.PositiveSpan) > 0 || hh.ZeroCount != nil {
		b.native, b.schema, b.zero, b.counts = true, hh.GetSchema(), hh.GetZeroCount(), map[int32]uint64{}
		var idx int32
		var c int64
		k := 0
		for _, sp := range hh.PositiveSpan {
			idx += sp.GetOffset() // the first span's is absolute, the others' after the previous span
			for j := uint32(0); j < sp.GetLength() && k < len(hh.PositiveDelta); j++ {
				c += hh.PositiveDelta[k] // counts are delta-encoded
				k++
				b.counts[idx] = uint64(c)
				idx++
			}
		}
		return b
	}
	for _, bk := range hh.Bucket {
		b.bounds = append(b.bounds, bk.GetUpperBound())
		b.cum = append(b.cum, bk.GetCumulativeCount())
	}
	return b
}

// minus is what b counted since earlier (an earlier reading of the same
// histogram).
func (b buckets) minus(earlier buckets) buckets {
	d := b
	d.count = b.count - earlier.count
	if b.native {
		if !earlier.native || earlier.schema != b.schema {
			return d
		}
		d.zero = b.zero - earlier.zero
		d.counts = make(map[int32]uint64, len(b.counts))
		for i, n := range b.counts {
			d.counts[i] = n - earlier.counts[i]
		}
		return d
	}
	if len(earlier.cum) != len(b.cum) {
		return d
	}
	d.cum = make([]uint64, len(b.cum))
	for i := range b.cum {
		d.cum[i] = b.cum[i] - earlier.cum[i]
	}
	return d
}

// quantile is the q-quantile (0..1) of what b counted, interpolated
// linearly inside the bucket it falls in; 0 when b counted nothing.
func (b buckets) quantile(q float64) float64 {
	if b.count == 0 {
		return 0
	}
	rank := q * float64(b.count)
	if b.native {
		return b.nativeQuantile(rank)
	}
	prevBound, prevCum := 0.0, uint64(0)
	for i, bound := range b.bounds {
		if float64(b.cum[i]) >= rank {
			if n := b.cum[i] - prevCum; n > 0 {
				return prevBound + (bound-prevBound)*(rank-float64(prevCum))/float64(n)
			}
			return bound
		}
		prevBound, prevCum = bound, b.cum[i]
	}
	return prevBound // above the last bound: say the last bound, as Prometheus does
}

func (b buckets) nativeQuantile(rank float64) float64 {
	if float64(b.zero) >= rank {
		return 0
	}
	idx := make([]int32, 0, len(b.counts))
	for i, n := range b.counts {
		if n > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	// Bucket i holds (base^(i-1), base^i], base = 2^(2^-schema).
	base := math.Pow(2, math.Pow(2, -float64(b.schema)))
	seen := float64(b.zero)
	for _, i := range idx {
		n := float64(b.counts[i])
		if seen+n >= rank {
			lo, hi := math.Pow(base, float64(i-1)), math.Pow(base, float64(i))
			return lo + (hi-lo)*(rank-seen)/n
		}
		seen += n
	}
	if len(idx) == 0 {
		return 0
	}
	return math.Pow(base, float64(idx[len(idx)-1]))
}
