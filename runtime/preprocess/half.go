package preprocess

import "math"

// halves converts src to float16 bits in dst (len(dst) ≥ len(src)):
// Half without branches on the value (its cases selected with masks),
// bit-identical to Half for every float32.
func halves(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		b := math.Float32bits(f)
		a := b &^ 0x80000000
		// Normal: rebias the exponent (127 → 15) and round to nearest
		// even; a carry into the exponent is correct, up to Inf.
		h := (a - 112<<23 + 0xfff + a>>13&1) >> 13
		// Below 2^-14 (subnormal or zero): adding 0.5 rounds to nearest
		// even at the half's subnormal spacing 2^-24.
		s := math.Float32bits(math.Float32frombits(a)+0.5) - 0x3f000000
		h ^= (h ^ s) & uint32(int32(a-113<<23)>>31)
		// From 2^16 up: Inf, or a quiet NaN above the float32 Inf.
		inf := 0x7c00 | uint32(int32(0x7f800000-a)>>31)&0x200
		h ^= (h ^ inf) & uint32(int32(0x477fffff-a)>>31)
		dst[i] = uint16(h | b>>16&0x8000)
	}
}
