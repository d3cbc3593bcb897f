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
