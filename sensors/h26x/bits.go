package h26x

// bitReader reads the bits of a NAL unit's payload (the RBSP), skipping
// emulation prevention bytes (0x03 after two 0x00). Reading past the end
// sets a sticky error and yields zeros, so parsers check err once per
// structure instead of after every field. It allocates nothing.
type bitReader struct {
	b     []byte
	pos   int  // next byte of b to load
	cur   byte // the byte being read
	left  uint // bits of cur not read yet
	zeros int  // consecutive 0x00 bytes loaded so far
	err   bool
}

func newBitReader(b []byte) bitReader { return bitReader{b: b} }

func (r *bitReader) load() bool {
	if r.pos >= len(r.b) {
		r.err = true
		return false
	}
	c := r.b[r.pos]
	r.pos++
	if r.zeros >= 2 && c == 3 {
		// emulation_prevention_three_byte: not part of the RBSP.
		r.zeros = 0
		if r.pos >= len(r.b) {
			r.err = true
			return false
		}
		c = r.b[r.pos]
		r.pos++
	}
	if c == 0 {
		r.zeros++
	} else {
		r.zeros = 0
	}
	r.cur, r.left = c, 8
	return true
}

// u reads n ≤ 32 bits, most significant first.
func (r *bitReader) u(n uint) uint32 {
	var v uint32
	for ; n > 0; n-- {
		if r.left == 0 && !r.load() {
			return 0
		}
		r.left--
		v = v<<1 | uint32(r.cur>>r.left&1)
	}
	return v
}

func (r *bitReader) flag() bool { return r.u(1) == 1 }

// skip drops n bits.
func (r *bitReader) skip(n uint) {
	for ; n > 32; n -= 32 {
		r.u(32)
	}
	r.u(n)
}

// ue reads an unsigned Exp-Golomb code (ue(v)); codes of more than 31
// leading zeros do not fit 32 bits and are an error.
func (r *bitReader) ue() uint32 {
	zeros := uint(0)
	for !r.flag() {
		if r.err {
			return 0
		}
		zeros++
		if zeros > 31 {
			r.err = true
			return 0
		}
	}
	if zeros == 0 {
		return 0
	}
	return (1<<zeros - 1) + r.u(zeros)
}

// se reads a signed Exp-Golomb code (se(v)).
func (r *bitReader) se() int32 {
	k := r.ue()
	if k&1 == 1 {
		return int32((k + 1) / 2)
	}
	return -int32(k / 2)
}

// ueMax reads ue(v) and fails when it exceeds max.
func (r *bitReader) ueMax(max uint32) uint32 {
	v := r.ue()
	if v > max {
		r.err = true
		return 0
	}
	return v
}
