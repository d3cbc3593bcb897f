package preprocess

import "github.com/edged-dev/edged/sensors"

// worker computes chunks of output rows with its own buffers. workers[0]
// is the caller of Run's; the others are long-lived goroutines (pool.go).
type worker struct {
	p    *Preprocessor
	wake chan struct{} // doorbell, capacity 1

	// Two filtered source rows (RGB·2^22 per image column) and the source
	// row each holds (-1: none), so rows shared by consecutive output rows
	// are filtered once per chunk.
	hrow [2][]int32
	slot [2]int32
	line []int32      // running sums of one converted source line (area)
	acc  []float32    // K-tap vertical accumulator
	tmp  [3][]float32 // an output row before an NHWC or float16 store
	il   []float32    // NHWC float16: the row interleaved before conversion
	k    *simdConsts  // the vector kernels' constants (nil: none on this CPU)

	filters int // horizontal passes run, for tests of the row cache
}

// chunk computes output rows chunks[c] of the frame in progress.
func (w *worker) chunk(c int) {
	p := w.p
	pl := p.plan
	rows := pl.chunks[c]
	w.slot = [2]int32{-1, -1}
	for y := rows[0]; y < rows[1]; y++ {
		if y < pl.g.Y0 || y >= pl.g.Y1 {
			p.pad(y, 0, p.opt.Out.W)
			continue
		}
		p.pad(y, 0, pl.g.X0)
		p.pad(y, pl.g.X1, p.opt.Out.W)
		w.imageRow(y)
	}
}

// filtered returns the buffer holding source row j filtered horizontally,
// filtering it unless cached, and its slot. It never evicts slot keep
// (-1: none). Rows are visited in increasing order, so a row still needed
// is either the one kept or the last one filtered, which the next output
// row reads first.
func (w *worker) filtered(j int32, keep int) ([]int32, int) {
	if w.slot[0] == j {
		return w.hrow[0], 0
	}
	if w.slot[1] == j {
		return w.hrow[1], 1
	}
	s := 0
	if keep == 0 {
		s = 1
	}
	w.filter(int(j), w.hrow[s])
	w.slot[s] = j
	return w.hrow[s], s
}

// lines returns the bytes of source row j: its line, and the line its
// chroma is in (the same line but for NV12).
func (w *worker) lines(j int) (yl, cl []byte) {
	p, pl := w.p, w.p.plan
	yl = p.src[j*pl.stride : j*pl.stride+pl.yLine]
	cl = yl
	if pl.cBase > 0 {
		o := pl.cBase + j/2*pl.stride
		cl = p.src[o : o+pl.cLine]
	}
	return yl, cl
}

// filter runs the horizontal pass over source row j.
func (w *worker) filter(j int, out []int32) {
	p, pl := w.p, w.p.plan
	w.filters++
	yl, cl := w.lines(j)
	if pl.x2 != nil {
		switch pl.kind {
		case kindYUV:
			n := w.h2SIMD(yl, cl, out)
			h2YUV(yl, cl, pl.x2[n:], p.yuv, out[3*n:])
		case kindRGB:
			h2RGB(yl, pl.x2, out)
		case kindGrey:
			h2Grey(yl, pl.x2, out)
		}
		return
	}
	n := pl.f.Width
	switch pl.f.Pixel {
	case sensors.YUYV:
		rowYUYV(yl, n, p.yuv, w.line, w.rowSIMD(yl, cl))
	case sensors.UYVY:
		rowUYVY(yl, n, p.yuv, w.line, w.rowSIMD(yl, cl))
	case sensors.NV12:
		rowNV12(yl, cl, n, p.yuv, w.line, w.rowSIMD(yl, cl))
	case sensors.RGB24, sensors.BGR24:
		rowRGB(yl, n, pl.f.Pixel == sensors.BGR24, w.line)
	case sensors.GREY:
		rowGrey(yl, n, w.line)
	}
	hArea(w.line, pl.area, out)
}

// imageRow computes the image columns of output row y.
func (w *worker) imageRow(y int) {
	p, pl := w.p, w.p.plan
	out := p.opt.Out
	x0, x1 := pl.g.X0, pl.g.X1
	// Where the vertical pass writes: the tensor itself for float32 planar
	// (and one channel, where NHWC is planar), else scratch and a store.
	var d [3][]float32
	direct := !out.Half && (!out.NHWC || out.C == 1)
	if direct {
		plane := out.H * out.W
		for k := range out.C {
			o := k*plane + y*out.W
			d[k] = p.f32[o+x0 : o+x1]
		}
	} else {
		d = w.tmp
	}
	i := y - pl.g.Y0
	t0, t1 := pl.yStart[i], pl.yStart[i+1]
	var c0, c1 [3]float32 // 2-tap vertical weights times the gains
	if pl.v2 {
		for k := range 3 {
			c0[k], c1[k] = p.gain[k]*pl.yW[t0], p.gain[k]*pl.yW[t0+1]
		}
	}
	switch {
	case pl.fused && pl.ySrc[t0] != pl.ySrc[t0+1]: // (one source row: cached pass)
		yt, ct := w.lines(int(pl.ySrc[t0]))
		yb, cb := w.lines(int(pl.ySrc[t0+1]))
		w.filters += 2
		d0, d1, d2 := d[p.chOf[0]], d[p.chOf[1]], d[p.chOf[2]]
		n := w.fusedSIMD(yt, ct, yb, cb, &c0, &c1, d0, d1, d2)
		fusedYUV(yt, ct, yb, cb, pl.x2[n:], p.yuv, &c0, &c1, &p.bias, d0[n:], d1[n:], d2[n:])
	case pl.v2:
		top, s := w.filtered(pl.ySrc[t0], -1)
		bot, _ := w.filtered(pl.ySrc[t0+1], s)
		if out.C == 1 {
			v2Luma(top, bot, &c0, &c1, p.bias[0], d[0])
		} else {
			d0, d1, d2 := d[p.chOf[0]], d[p.chOf[1]], d[p.chOf[2]]
			n := w.v2SIMD(top, bot, &c0, &c1, d0, d1, d2)
			v2RGB(top[3*n:], bot[3*n:], &c0, &c1, &p.bias, d0[n:], d1[n:], d2[n:])
		}
	default:
		for t := t0; t < t1; t++ {
			h, _ := w.filtered(pl.ySrc[t], -1)
			if t == t0 {
				vSet(w.acc, h, pl.yW[t])
			} else {
				vAdd(w.acc, h, pl.yW[t])
			}
		}
		if out.C == 1 {
			finLuma(w.acc, &p.gain, p.bias[0], d[0])
		} else {
			finRGB(w.acc, &p.gain, &p.bias, d[p.chOf[0]], d[p.chOf[1]], d[p.chOf[2]])
		}
	}
	if direct {
		return
	}
	row := y * out.W
	switch {
	case out.NHWC && out.C == 3 && out.Half:
		storeNHWCHalf(&w.tmp, w.il, p.f16[3*(row+x0):3*(row+x1)])
	case out.NHWC && out.C == 3:
		storeNHWC(&w.tmp, p.f32[3*(row+x0):3*(row+x1)])
	default: // float16 planar
		plane := out.H * out.W
		for k := range out.C {
			o := k*plane + row
			halvesFast(p.f16[o+x0:o+x1], w.tmp[k][:x1-x0])
		}
	}
}

// pad fills columns [x0, x1) of output row y with the padding value.
func (p *Preprocessor) pad(y, x0, x1 int) {
	if x0 >= x1 {
		return
	}
	out := p.opt.Out
	row, plane := y*out.W, out.H*out.W
	switch {
	case out.NHWC && out.C == 3 && out.Half:
		d := p.f16[3*(row+x0) : 3*(row+x1)]
		for x := 0; x < len(d); x += 3 {
			d[x], d[x+1], d[x+2] = p.padH[0], p.padH[1], p.padH[2]
		}
	case out.NHWC && out.C == 3:
		d := p.f32[3*(row+x0) : 3*(row+x1)]
		for x := 0; x < len(d); x += 3 {
			d[x], d[x+1], d[x+2] = p.padF[0], p.padF[1], p.padF[2]
		}
	case out.Half:
		for k := range out.C {
			o := k*plane + row
			fill(p.f16[o+x0:o+x1], p.padH[k])
		}
	default:
		for k := range out.C {
			o := k*plane + row
			fill(p.f32[o+x0:o+x1], p.padF[k])
		}
	}
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}
