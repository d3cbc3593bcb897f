package preprocess

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestHalvesMatchesHalf checks the branch-free halves against Half on
// every exponent and sign with the low mantissa bits at each rounding
// boundary (and the bits above them walked), plus random values.
func TestHalvesMatchesHalf(t *testing.T) {
	var src [1]float32
	var dst [1]uint16
	check := func(b uint32) {
		src[0] = math.Float32frombits(b)
		halves(dst[:], src[:])
		if want := Half(src[0]); dst[0] != want {
			t.Fatalf("halves(%g [%#08x]) = %#04x, Half = %#04x", src[0], b, dst[0], want)
		}
	}
	for hi := uint32(0); hi < 1<<19; hi++ { // sign, exponent, top 10 mantissa bits
		for _, lo := range []uint32{0, 1, 0x7ff, 0xfff, 0x1000, 0x1001, 0x1800, 0x1fff} {
			check(hi<<13 | lo)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000000 {
		check(r.Uint32())
	}
}

// TestHalvesFastMatchesHalf checks the vector conversion (where the CPU
// has one) against Half on the same values as TestHalvesMatchesHalf, eight
// at a time, with a tail: bit-identical but for NaN, which must stay NaN.
func TestHalvesFastMatchesHalf(t *testing.T) {
	if !haveF16C {
		t.Skip("no vector float16 conversion on this machine")
	}
	src := make([]float32, 0, 8<<19+3)
	for hi := uint32(0); hi < 1<<19; hi++ {
		for _, lo := range []uint32{0, 1, 0x7ff, 0xfff, 0x1000, 0x1001, 0x1800, 0x1fff} {
			src = append(src, math.Float32frombits(hi<<13|lo))
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000003 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	dst := make([]uint16, len(src))
	halvesFast(dst, src)
	for i, f := range src {
		want := Half(f)
		if f != f {
			if dst[i]&0x7c00 != 0x7c00 || dst[i]&0x3ff == 0 || dst[i]&0x8000 != want&0x8000 {
				t.Fatalf("halvesFast(NaN [%#08x]) = %#04x, not a NaN of that sign", math.Float32bits(f), dst[i])
			}
			continue
		}
		if dst[i] != want {
			t.Fatalf("halvesFast(%g [%#08x]) = %#04x, Half = %#04x", f, math.Float32bits(f), dst[i], want)
		}
	}
}
