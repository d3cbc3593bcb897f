//go:build amd64 && !purego

package preprocess

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveSIMD says whether the CPU path uses the vector kernels; tests turn
// it off to check the portable code on the same machine.
var haveSIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func h2YUVAVX2(yl, cl *byte, tab *colBlock, nblk int, k *simdConsts, out *int32, packed int)

//go:noescape
func rowYUVAVX2(yl, cl *byte, tab *lineBlock, nblk int, k *simdConsts, s *int32, packed int, masks *[32]byte)

//go:noescape
func v2RGBAVX2(top, bot *int32, nblk int, k *simdConsts, d0, d1, d2 *float32)

//go:noescape
func fusedYUVAVX2(yt, ct, yb, cb *byte, tab *colBlock, nblk int, k *simdConsts, d0, d1, d2 *float32, packed int)

// fusedSIMD runs the vector kernel over the plan's blocks of one output
// row and returns the columns it wrote.
func (w *worker) fusedSIMD(yt, ct, yb, cb []byte, c0, c1 *[3]float32, d0, d1, d2 []float32) int {
	pl := w.p.plan
	n := 8 * len(pl.simd)
	if n == 0 || len(yt) < pl.yLine || len(yb) < pl.yLine || len(ct) < pl.chromaLine() || len(cb) < pl.chromaLine() ||
		len(d0) < n || len(d1) < n || len(d2) < n {
		return 0
	}
	w.k.setRow(c0, c1, 1/rowScale)
	fusedYUVAVX2(unsafe.SliceData(yt), unsafe.SliceData(ct), unsafe.SliceData(yb), unsafe.SliceData(cb),
		&pl.simd[0], len(pl.simd), w.k, unsafe.SliceData(d0), unsafe.SliceData(d1), unsafe.SliceData(d2), packedArg(pl))
	return n
}

// h2SIMD runs the vector kernel's horizontal pass over one source line
// into out (h2YUV's layout) and returns the columns it wrote.
func (w *worker) h2SIMD(yl, cl []byte, out []int32) int {
	pl := w.p.plan
	n := 8 * len(pl.simd)
	if n == 0 || len(yl) < pl.yLine || len(cl) < pl.chromaLine() || len(out) < 3*n {
		return 0
	}
	h2YUVAVX2(unsafe.SliceData(yl), unsafe.SliceData(cl), &pl.simd[0], len(pl.simd), w.k, unsafe.SliceData(out), packedArg(pl))
	return n
}

// v2SIMD runs the vector kernel of v2RGB over the full blocks of eight
// columns of one output row and returns the columns it wrote.
func (w *worker) v2SIMD(top, bot []int32, c0, c1 *[3]float32, d0, d1, d2 []float32) int {
	n := len(d0) &^ 7
	if w.k == nil || n == 0 || len(top) < 3*n || len(bot) < 3*n || len(d1) < n || len(d2) < n {
		return 0
	}
	w.k.setRow(c0, c1, 1)
	v2RGBAVX2(unsafe.SliceData(top), unsafe.SliceData(bot), n/8, w.k, unsafe.SliceData(d0), unsafe.SliceData(d1), unsafe.SliceData(d2))
	return n
}

// rowSIMD runs the vector kernel of the area pass's row conversion over
// the plan's full blocks of eight pixels of one line, writing the running
// sums w.line[:3x+3], and returns x, the pixels it converted (0: none).
func (w *worker) rowSIMD(yl, cl []byte) int {
	pl := w.p.plan
	n := 8 * len(pl.lines)
	if n == 0 || w.k == nil || len(yl) < pl.yLine || len(cl) < pl.chromaLine() || len(w.line) < 3*(n+1) || (pl.packed() && len(yl) < 2*n) {
		return 0
	}
	rowYUVAVX2(unsafe.SliceData(yl), unsafe.SliceData(cl), &pl.lines[0], len(pl.lines), w.k, unsafe.SliceData(w.line), packedArg(pl), &pl.rowMasks)
	return n
}

// packedArg is the kernels' packed argument: 1 for YUYV and UYVY lines,
// 0 for NV12.
func packedArg(pl *plan) int {
	if pl.packed() {
		return 1
	}
	return 0
}
