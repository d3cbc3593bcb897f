package sensors

import "sync"

// Ring keeps the latest samples of one sensor, bounded, for matching them
// to frames by capture time. It is safe for concurrent use: typically one
// goroutine pushes what a SampleSource delivers and pipelines look samples
// up. Samples must be pushed in non-decreasing TMono order (the order a
// source timestamps them in); an older sample is refused.
type Ring struct {
	mu    sync.RWMutex
	buf   []Sample
	start int // index of the oldest sample
	n     int
}

// NewRing returns a ring holding at most capacity samples (at least 1).
func NewRing(capacity int) *Ring {
	return &Ring{buf: make([]Sample, max(1, capacity))}
}

// Push adds s, overwriting the oldest sample when full. It reports false
// (and keeps nothing) when s is older than the newest sample.
func (r *Ring) Push(s Sample) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n > 0 && s.TMono < r.at(r.n-1).TMono {
		return false
	}
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return true
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
	return true
}

// Len is the number of samples held.
func (r *Ring) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.n
}

func (r *Ring) at(i int) *Sample { return &r.buf[(r.start+i)%len(r.buf)] }

// search returns the index of the first sample with TMono >= t.
func (r *Ring) search(t int64) int {
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.at(m).TMono < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Nearest appends to dst the sample whose TMono is nearest to t, if one
// lies within [t-window, t+window]; on a tie the earlier sample wins. It
// allocates nothing when dst has room for one more sample.
func (r *Ring) Nearest(t, window int64, dst []Sample) []Sample {
	r.mu.RLock()
	defer r.mu.RUnlock()
	i := r.search(t)
	best, bestD := -1, int64(0)
	if i > 0 {
		best, bestD = i-1, t-r.at(i-1).TMono
	}
	if i < r.n {
		if d := r.at(i).TMono - t; best < 0 || d < bestD {
			best, bestD = i, d
		}
	}
	if best < 0 || bestD > window || bestD < 0 {
		return dst
	}
	return append(dst, *r.at(best))
}

// Between appends to dst every sample with from <= TMono <= to, oldest
// first.
func (r *Ring) Between(from, to int64, dst []Sample) []Sample {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for i := r.search(from); i < r.n; i++ {
		s := r.at(i)
		if s.TMono > to {
			break
		}
		dst = append(dst, *s)
	}
	return dst
}
