//go:build !amd64 || purego

package preprocess

// haveSIMD is false: the CPU path has no vector kernels on this
// architecture (fused_amd64.s is AVX2).
var haveSIMD = false

func (w *worker) fusedSIMD(yt, ct, yb, cb []byte, c0, c1 *[3]float32, d0, d1, d2 []float32) int {
	return 0
}

func (w *worker) h2SIMD(yl, cl []byte, out []int32) int { return 0 }

func (w *worker) v2SIMD(top, bot []int32, c0, c1 *[3]float32, d0, d1, d2 []float32) int { return 0 }

func (w *worker) rowSIMD(yl, cl []byte) int { return 0 }
