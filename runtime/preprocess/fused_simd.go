package preprocess

import (
	"math"

	"github.com/edged-dev/edged/sensors"
)

// The vector kernels (fused_amd64.s, AVX2 with FMA) compute what fusedYUV,
// h2YUV, v2RGB and the YUV row* functions compute, in float32, eight
// columns at a time. In the first two each tap's source bytes come from
// one 4-byte load (two for NV12, whose chroma is in its own line) at an
// offset the plan computed, and a per-column shift picks Y, U and V out of
// it. The fused one writes the output row; the horizontal one writes a
// filtered source row in h2YUV's fixed point for the row cache, which the
// vertical one blends. The row one converts a whole line into running
// sums: packed lines 16 bytes at a time (rowMasks), NV12 lines through
// lineBlocks. Columns past the last full block of eight go through the
// portable functions.

// colBlock describes eight consecutive output columns for the kernel:
// per tap, the offsets of the 4-byte words holding the pixel's Y (o) and
// chroma (oc) in their lines, the bit shifts of Y, U and V in them, and
// the weight of tap 1. The layout is the kernel's (offsets in
// fused_amd64.s; TestColBlockLayout).
type colBlock struct {
	o0, oc0, sy0, su0, sv0 [8]int32
	o1, oc1, sy1, su1, sv1 [8]int32
	w                      [8]float32
}

// lineBlock describes eight consecutive pixels of a line for the area
// pass's row kernel, laid out as colBlock's tap 0 (the kernel reads it with
// the same offsets).
type lineBlock struct {
	o, oc, sy, su, sv [8]int32
}

// simdLine builds the row kernel's blocks for the full groups of eight of
// the pixels px (pixelOffsets), or nil where a line is too short for
// 4-byte loads.
func simdLine(px []pxOff, packed bool, yLine, cLine int) []lineBlock {
	if yLine < 4 || (!packed && cLine < 4) {
		return nil
	}
	blocks := make([]lineBlock, len(px)/8)
	for bi := range blocks {
		b := &blocks[bi]
		for j := range 8 {
			b.o[j], b.oc[j], b.sy[j], b.su[j], b.sv[j] = tapWords(px[8*bi+j], packed, yLine, cLine)
		}
	}
	return blocks
}

// rowMasks are the row kernel's VPSHUFB masks for 16 bytes (8 pixels) of
// a packed 4:2:2 line: the 8 Y bytes, then the 4 U bytes each twice; and
// the 4 V bytes each twice (0x80: zero).
func rowMasks(pf sensors.PixelFormat) [32]byte {
	y, u, v := 0, 1, 3 // YUYV: Y0 U Y1 V
	if pf == sensors.UYVY {
		y, u, v = 1, 0, 2 // U Y0 V Y1
	}
	var m [32]byte
	for i := range 8 {
		m[i] = byte(y + 2*i)
		m[8+i] = byte(u + 4*(i/2))
		m[16+i] = byte(v + 4*(i/2))
		m[24+i] = 0x80
	}
	return m
}

// simdConsts are the kernels' constants, each as a vector of eight: the
// colour conversion (float form of Coeffs, with the −128 and −YOff terms
// folded into one offset per channel), the clamp bounds, the byte mask,
// and the output row's vertical weights times the gains (c0, c1) and the
// biases, per RGB channel.
type simdConsts struct {
	ygain, kr, kg, kb, rv, ngu, ngv, bu [8]float32
	zero, c255, m255                    [8]float32
	c0, c1, bias                        [3][8]float32
	// The horizontal kernel's: the fixed-point scale of a filtered row
	// (2^(fracBits+wBits)), and the VPERMD indices that interleave eight
	// R, G and B values into 24.
	fix  [8]float32
	perm [3][8]int32
	// The vertical kernel's VPERMD indices that take 24 interleaved values
	// apart again, after blends gathered each channel's eight.
	unperm [3][8]int32
	// The row kernel's: the fixed point of a converted pixel (2^fracBits)
	// and the VPERMD index that broadcasts the last lane.
	fix8  [8]float32
	last7 [8]int32
}

func newSIMDConsts(k Coeffs, bias [3]float32) *simdConsts {
	c := new(simdConsts)
	base := -k.YOff * k.YGain
	fill(c.ygain[:], k.YGain)
	fill(c.kr[:], base-128*k.RV)
	fill(c.kg[:], base+128*(k.GU+k.GV))
	fill(c.kb[:], base-128*k.BU)
	fill(c.rv[:], k.RV)
	fill(c.ngu[:], -k.GU)
	fill(c.ngv[:], -k.GV)
	fill(c.bu[:], k.BU)
	fill(c.c255[:], 255)
	fill(c.m255[:], math.Float32frombits(0xff))
	for ch := range 3 {
		fill(c.bias[ch][:], bias[ch])
	}
	fill(c.fix[:], 1<<(fracBits+wBits))
	c.perm = [3][8]int32{{0, 0, 0, 1, 1, 1, 2, 2}, {2, 3, 3, 3, 4, 4, 4, 5}, {5, 5, 6, 6, 6, 7, 7, 7}}
	c.unperm = [3][8]int32{{0, 3, 6, 1, 4, 7, 2, 5}, {1, 4, 7, 2, 5, 0, 3, 6}, {2, 5, 0, 3, 6, 1, 4, 7}}
	fill(c.fix8[:], 1<<fracBits)
	fill(c.last7[:], 7)
	return c
}

// setRow loads an output row's vertical weights (fixed-point scaled, as
// fusedYUV and v2RGB take them) times scale: 1/rowScale for the fused
// kernel, which blends RGB in [0, 255]; 1 for the vertical kernel, which
// blends filtered rows in fixed point.
func (c *simdConsts) setRow(c0, c1 *[3]float32, scale float32) {
	for ch := range 3 {
		fill(c.c0[ch][:], c0[ch]*scale)
		fill(c.c1[ch][:], c1[ch]*scale)
	}
}

// simdColumns builds the kernel's blocks for the full groups of eight of
// n output columns whose taps are t (two per column, the second of weight
// w), and the line lengths the kernel's loads need. packed: Y, U and V of
// a pixel lie within 4 bytes of one line (YUYV, UYVY); otherwise luma
// and chroma are separate lines of yLine and cLine bytes (NV12). It
// returns nil where a line is too short for 4-byte loads.
func simdColumns(t []xtap, w []float32, packed bool, yLine, cLine int) []colBlock {
	if yLine < 4 || (!packed && cLine < 4) {
		return nil
	}
	blocks := make([]colBlock, len(t)/8)
	for bi := range blocks {
		b := &blocks[bi]
		for j := range 8 {
			x := &t[8*bi+j]
			b.o0[j], b.oc0[j], b.sy0[j], b.su0[j], b.sv0[j] = tapWords(x.p0, packed, yLine, cLine)
			b.o1[j], b.oc1[j], b.sy1[j], b.su1[j], b.sv1[j] = tapWords(x.p1, packed, yLine, cLine)
			b.w[j] = w[8*bi+j]
		}
	}
	return blocks
}

// tapWords places a pixel's bytes in 4-byte words that end within their
// lines.
func tapWords(p pxOff, packed bool, yLine, cLine int) (o, oc, sy, su, sv int32) {
	if packed {
		o = min(p.a, p.b, p.c, int32(yLine-4))
		return o, o, 8 * (p.a - o), 8 * (p.b - o), 8 * (p.c - o)
	}
	o = min(p.a, int32(yLine-4))
	oc = min(p.b, p.c, int32(cLine-4))
	return o, oc, 8 * (p.a - o), 8 * (p.b - oc), 8 * (p.c - oc)
}
