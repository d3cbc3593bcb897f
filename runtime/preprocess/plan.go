package preprocess

import (
	"math"
	"runtime"
	"unsafe"

	"github.com/edged-dev/edged/sensors"
)

// pixelKind selects the horizontal kernels for a pixel format.
type pixelKind int

const (
	kindYUV  pixelKind = iota // YUYV, UYVY (packed) and NV12 (chroma plane)
	kindRGB                   // RGB24, BGR24 (offsets say which byte is R)
	kindGrey                  // GREY
)

// plan holds the tables for one source format and size; a Preprocessor
// builds it on the first frame of that format and reuses it.
type plan struct {
	f      sensors.Format // Pixel, Width, Height and Stride are the key
	g      Geometry
	iw, ih int // image area in the output
	kind   pixelKind
	stride int // bytes per source line
	yLine  int // bytes of a line the pixels are read from
	cBase  int // NV12: offset of the chroma plane (0: chroma in the line)
	cLine  int // NV12: bytes of a chroma line read

	// Horizontal: x2 when every column reads at most 2 pixels (bilinear,
	// or area where the image grows); otherwise area converts whole lines
	// into running sums (rowBuf int32s) and weighs footprints.
	x2     []xtap
	area   []areaTap
	rowBuf int // int32s of the converted line (K-tap only)
	// Vertical: output image row i reads filtered source rows
	// ySrc[yStart[i]:yStart[i+1]] weighted yW (which carries rowScale);
	// v2 when every row has exactly 2 entries (yStart[i] = 2i).
	yStart, ySrc []int32
	yW           []float32
	v2           bool
	// fused: YUV source, 3 channels, bilinear both ways and no source row
	// read by two output rows (the image shrinks 2× or more vertically):
	// each output row is computed in one pass (fused.go).
	fused bool
	// simd: the columns of a YUV bilinear pass in blocks of eight for the
	// vector kernels (fused_simd.go; nil where there are none).
	simd []colBlock
	// lines: every pixel of a YUV line in blocks of eight, for the vector
	// kernel of the area pass's row conversion (nil where there is none).
	lines    []lineBlock
	rowMasks [32]byte // packed lines: the row kernel's VPSHUFB masks (fused_simd.go)

	chunks [][2]int // output rows [lo, hi) claimed as a unit (pool.go)
}

// packed says whether a pixel's chroma is in its own line (YUYV, UYVY),
// not in a chroma plane (NV12).
func (pl *plan) packed() bool { return pl.cBase == 0 }

// chromaLine is the length of the line lines returns for chroma: the
// pixel's own line when packed, else a line of the chroma plane.
func (pl *plan) chromaLine() int {
	if pl.packed() {
		return pl.yLine
	}
	return pl.cLine
}

func (pl *plan) matches(f sensors.Format) bool {
	return pl != nil && pl.f.Pixel == f.Pixel && pl.f.Width == f.Width && pl.f.Height == f.Height &&
		pl.f.LineBytes() == f.LineBytes()
}

// newPlan builds the tables for frames of format f (already checked).
func newPlan(f sensors.Format, o Options, threads int) *plan {
	pl := &plan{f: f, stride: f.LineBytes()}
	pl.g = Place(f.Width, f.Height, o.Out.W, o.Out.H, o.Resize)
	pl.iw, pl.ih = pl.g.X1-pl.g.X0, pl.g.Y1-pl.g.Y0
	switch f.Pixel {
	case sensors.YUYV, sensors.UYVY:
		pl.kind, pl.yLine = kindYUV, 4*((f.Width+1)/2)
	case sensors.NV12:
		pl.kind, pl.yLine = kindYUV, f.Width
		pl.cBase, pl.cLine = pl.stride*f.Height, 2*((f.Width+1)/2)
	case sensors.GREY:
		pl.kind, pl.yLine = kindGrey, f.Width
	default:
		pl.kind, pl.yLine = kindRGB, 3*f.Width
	}

	xt := Taps(o.Filter, f.Width, pl.iw)
	if maxTaps(xt) <= 2 {
		px := pixelOffsets(f)
		pl.x2 = make([]xtap, pl.iw)
		for i, t := range xt {
			x := xtap{p0: px[t[0].Src], p1: px[t[0].Src]}
			if len(t) == 2 {
				x.p1, x.w1 = px[t[1].Src], int32(math.Round(t[1].Weight*wOne))
			}
			pl.x2[i] = x
		}
	} else {
		pl.area = make([]areaTap, pl.iw)
		for i, t := range xt {
			pl.area[i] = newAreaTap(t)
		}
		pl.rowBuf = 3 * (f.Width + 1)
		if pl.kind == kindYUV && haveSIMD {
			pl.lines = simdLine(pixelOffsets(f), pl.packed(), pl.yLine, pl.cLine)
			pl.rowMasks = rowMasks(f.Pixel)
		}
	}

	yt := Taps(o.Filter, f.Height, pl.ih)
	pl.v2 = maxTaps(yt) <= 2
	pl.yStart = make([]int32, 0, pl.ih+1)
	for _, t := range yt {
		pl.yStart = append(pl.yStart, int32(len(pl.ySrc)))
		pl.fused = pl.kind == kindYUV && o.Out.C == 3 && pl.x2 != nil && pl.v2
		for i := 2; i < len(pl.ySrc) && pl.fused; i += 2 {
			pl.fused = pl.ySrc[i] > pl.ySrc[i-1]
		}
		for _, tp := range t {
			pl.ySrc = append(pl.ySrc, int32(tp.Src))
			pl.yW = append(pl.yW, float32(tp.Weight*rowScale))
		}
		if pl.v2 && len(t) == 1 { // a second tap of weight 0 keeps v2 regular
			pl.ySrc = append(pl.ySrc, int32(t[0].Src))
			pl.yW = append(pl.yW, 0)
		}
	}
	pl.yStart = append(pl.yStart, int32(len(pl.ySrc)))
	pl.fused = pl.kind == kindYUV && o.Out.C == 3 && pl.x2 != nil && pl.v2
	for i := 2; i < len(pl.ySrc) && pl.fused; i += 2 {
		pl.fused = pl.ySrc[i] > pl.ySrc[i-1]
	}
	if pl.kind == kindYUV && pl.x2 != nil && haveSIMD {
		w := make([]float32, len(xt))
		for i, t := range xt {
			if len(t) == 2 {
				w[i] = float32(t[1].Weight)
			}
		}
		pl.simd = simdColumns(pl.x2, w, pl.packed(), pl.yLine, pl.cLine)
	}

	// Chunks split the image rows evenly, a few per thread so that a
	// thread that starts late still gets a share; padding rows go to the
	// first and last chunk. One thread, or a frame too small to be worth
	// waking another, takes the frame as one chunk.
	n := 1
	if threads > 1 && pl.conversions() >= minParallel {
		n = max(1, min(pl.ih, 4*threads))
	}
	pl.chunks = make([][2]int, n)
	for i := range pl.chunks {
		pl.chunks[i] = [2]int{pl.g.Y0 + pl.ih*i/n, pl.g.Y0 + pl.ih*(i+1)/n}
	}
	pl.chunks[0][0] = 0
	pl.chunks[n-1][1] = o.Out.H
	return pl
}

// minParallel is the number of source pixel conversions (about 0.15 ms
// on one core) below which a frame runs on the caller alone: waking a
// worker costs more than it saves.
const minParallel = 1 << 16

// conversions estimates the source pixels a frame converts: two per
// column in each row read (bilinear), or every pixel of every row (area).
func (pl *plan) conversions() int {
	rows := min(pl.f.Height, len(pl.ySrc))
	if pl.x2 != nil {
		return 2 * pl.iw * rows
	}
	return pl.f.Width * rows
}

func maxTaps(t [][]Tap) int {
	n := 0
	for _, ti := range t {
		n = max(n, len(ti))
	}
	return n
}

// newAreaTap rounds a footprint's weights (consecutive pixels, those
// between the first and last weighted alike) to fixed point; the last
// weight takes what the others leave of 1.
func newAreaTap(t []Tap) areaTap {
	n := len(t)
	a := areaTap{first: int32(t[0].Src), last: int32(t[n-1].Src), wFirst: int32(math.Round(t[0].Weight * wOne))}
	a.midEnd = max(a.last, a.first+1)
	if n == 1 {
		a.wFirst = wOne
		return a
	}
	if n > 2 {
		a.wMid = int64(math.Round(t[1].Weight * wOne * (1 << midBits)))
	}
	mid := int32(math.Round(float64(int64(n-2)*a.wMid) / (1 << midBits)))
	a.wLast = wOne - a.wFirst - mid
	return a
}

// pixelOffsets locates every pixel of a line (chroma in the chroma line
// for NV12).
func pixelOffsets(f sensors.Format) []pxOff {
	px := make([]pxOff, f.Width)
	for x := range px {
		m, odd := int32(4*(x/2)), int32(2*(x%2))
		i := int32(x)
		switch f.Pixel {
		case sensors.YUYV: // Y0 U Y1 V
			px[x] = pxOff{m + odd, m + 1, m + 3}
		case sensors.UYVY: // U Y0 V Y1
			px[x] = pxOff{m + 1 + odd, m, m + 2}
		case sensors.NV12:
			px[x] = pxOff{i, 2 * (i / 2), 2*(i/2) + 1}
		case sensors.GREY:
			px[x] = pxOff{i, i, i}
		case sensors.RGB24:
			px[x] = pxOff{3 * i, 3*i + 1, 3*i + 2}
		case sensors.BGR24:
			px[x] = pxOff{3*i + 2, 3*i + 1, 3 * i}
		}
	}
	return px
}

// WorkBytes bounds the memory the CPU path of a preprocessor with threads
// workers (0: as New picks) allocates for frames of srcW×srcH into an
// outW×outH input: the tables of a plan (kept, and the taps they are built
// from), and each worker's row buffers. Everything is linear in the
// widths and heights (no intermediate image), so it is small next to the
// frames and the tensor, but a person can configure sizes that make it
// count; the memory check adds it up.
func WorkBytes(srcW, srcH, outW, outH, threads int) int64 {
	if threads <= 0 {
		threads = min(runtime.GOMAXPROCS(0), 4)
	}
	n, m, nh, mh, th := int64(max(srcW, 1)), int64(max(outW, 1)), int64(max(srcH, 1)), int64(max(outH, 1)), int64(threads)
	const (
		tap      = int64(unsafe.Sizeof(Tap{}))
		header   = int64(unsafe.Sizeof([]Tap(nil)))
		colTap   = max(int64(unsafe.Sizeof(xtap{})), int64(unsafe.Sizeof(areaTap{})))
		colBlk   = int64(unsafe.Sizeof(colBlock{}))
		lineBlk  = int64(unsafe.Sizeof(lineBlock{}))
		pixel    = int64(unsafe.Sizeof(pxOff{}))
		overhead = 64 << 10
	)
	// Taps of both axes, built and then dropped (append doubles at most).
	taps := func(src, dst int64) int64 { return header*dst + 2*tap*(src+2*dst) }
	built := taps(n, m) + taps(nh, mh)
	columns := 2*pixel*n + colTap*m + colBlk*(m/8+1) + 4*m + lineBlk*(n/8+1)
	lines := 4*(mh+1) + 2*8*(nh+2*mh) // yStart, ySrc and yW
	chunks := 16 * 4 * th
	// Each worker's hrow, line, acc, tmp and il.
	rows := th * (2*3*4*m + 3*4*(n+1) + 3*4*m + 3*4*m + 3*4*m)
	plan := built + columns + lines + chunks
	return plan + rows + overhead
}
