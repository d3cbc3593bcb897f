package trt

import (
	"math"
	"sync"
	"unsafe"
)

// ReadFloat32 converts the tensor's values, read from its host view, to
// float32 in dst and returns dst[:Elements()]. It returns nil when the
// memory is not host-accessible now, dst is too short, or the type is not
// one of edged's. Integers convert exactly up to 2^24 in magnitude (the
// float32 mantissa) and are rounded beyond; bool is 0 or 1; float16 goes
// by Float16ToFloat32Into (F16C or a table). It allocates nothing,
// so post-processing calls it for every frame.
func (t *Tensor) ReadFloat32(dst []float32) []float32 {
	if t.Buf == nil {
		return nil
	}
	n := int(t.Elements())
	b, err := t.Buf.Host()
	if err != nil || n < 0 || len(dst) < n || n*t.Type.Size() > len(b) {
		return nil
	}
	dst = dst[:n]
	if n == 0 {
		return dst
	}
	p := unsafe.Pointer(&b[0])
	switch t.Type {
	case Float32:
		copy(dst, unsafe.Slice((*float32)(p), n))
	case Float16:
		Float16ToFloat32Into(dst, unsafe.Slice((*uint16)(p), n))
	case Int8:
		for i, v := range unsafe.Slice((*int8)(p), n) {
			dst[i] = float32(v)
		}
	case Uint8:
		for i, v := range b[:n] {
			dst[i] = float32(v)
		}
	case Bool:
		for i, v := range b[:n] {
			dst[i] = 0
			if v != 0 {
				dst[i] = 1
			}
		}
	case Int32:
		for i, v := range unsafe.Slice((*int32)(p), n) {
			dst[i] = float32(v)
		}
	case Int64:
		for i, v := range unsafe.Slice((*int64)(p), n) {
			dst[i] = float32(v)
		}
	default:
		return nil
	}
	return dst
}

// halfTable maps every IEEE 754 half-precision bit pattern to its float32.
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = HalfToFloat32(uint16(h))
	}
	return &t
})

// Float16ToFloat32Into converts IEEE half-precision values (as their bits)
// to float32: dst[i] = src[i] for i < min(len(dst), len(src)). On amd64
// with F16C, eight at a time with VCVTPH2PS; elsewhere (and for the last
// few) through a table of every half value (256 KiB, built on first use),
// one load per element. Both are exact (F16C quiets a signalling NaN).
func Float16ToFloat32Into(dst []float32, src []uint16) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	k := widenFast(dst, src)
	if k == n {
		return
	}
	t := halfTable()
	for i, h := range src[k:] {
		dst[k+i] = t[h]
	}
}

// HalfToFloat32 converts one IEEE half-precision value exactly:
// subnormals, infinities and NaN (payload kept) included.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant × 2^-24, exact in float32.
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}
