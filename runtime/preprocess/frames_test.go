package preprocess

import (
	"math/rand/v2"

	"github.com/edged-dev/edged/sensors"
)

// noise is a frame of seeded random bytes (stride padding included): every
// YUV combination, so the clamps are exercised everywhere.
func noise(f sensors.Format, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	b := make([]byte, f.FrameSize())
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// flat is a frame of one colour.
func flat(f sensors.Format) []byte {
	return render(f, func(int, int) [3]uint8 { return [3]uint8{90, 160, 60} })
}
