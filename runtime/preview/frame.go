package preview

import (
	"errors"
	"fmt"
	"image"

	"github.com/edged-dev/edged/sensors"
)

// Errors of a frame the tap cannot copy (counted, never fatal).
var (
	// ErrFrameFormat: a pixel format the preview does not show, or a
	// size that does not fit the frame's bytes.
	ErrFrameFormat = errors.New("preview: frame not shown")
)

// Frame is a frame as the pipeline hands it to the tap: its bytes are
// readable on the host while Copy runs, and only then.
type Frame struct {
	Seq      uint64
	TCapture int64 // CLOCK_MONOTONIC ns
	Format   sensors.Format
	Data     []byte
	// Matrix is how the pipeline reads YUV frames (its preprocessing's
	// colour matrix and range): the picture has the colours the model sees.
	Matrix Matrix
}

// rows is a frame cut down to what a picture at most maxWidth wide shows:
// every step-th row of each plane, whole (a row is copied with one memmove;
// columns are picked later, off the pipeline's goroutine).
type rows struct {
	f        sensors.Format
	step     int // rows and columns kept: 0, step, 2·step, …
	n        int // luma rows kept
	line     int // bytes of one kept row (packed)
	chroma   int // offset of NV12's chroma rows in buf (n rows of line bytes each)
	buf      []byte
	seq      uint64
	tCapture int64
	matrix   Matrix
}

// stepFor is the smallest whole step that brings width w to at most max.
func stepFor(w, maxWidth int) int {
	return max(1, (w+maxWidth-1)/maxWidth)
}

// copyFrom keeps the rows of f that a picture at most maxWidth wide
// shows. It allocates only when the frame's geometry grows.
func (r *rows) copyFrom(f Frame, maxWidth int) error {
	ff := f.Format
	switch ff.Pixel {
	case sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.GREY, sensors.RGB24, sensors.BGR24:
	default:
		return fmt.Errorf("%w: %s frames", ErrFrameFormat, ff.Pixel)
	}
	if ff.Width <= 0 || ff.Height <= 0 || (ff.Pixel == sensors.NV12 && ff.Width%2 != 0) {
		return fmt.Errorf("%w: %dx%d %s", ErrFrameFormat, ff.Width, ff.Height, ff.Pixel)
	}
	stride, line := ff.LineBytes(), ff.Pixel.PackedLine(ff.Width)
	need := stride*(ff.Height-1) + line
	if ff.Pixel == sensors.NV12 {
		need = stride*ff.Height + stride*((ff.Height+1)/2-1) + line
	}
	if stride < line || len(f.Data) < need {
		return fmt.Errorf("%w: %d bytes for a %s frame (stride %d)", ErrFrameFormat, len(f.Data), ff, stride)
	}
	step := stepFor(ff.Width, maxWidth)
	n := (ff.Height + step - 1) / step
	size := n * line
	if ff.Pixel == sensors.NV12 {
		size *= 2
	}
	if cap(r.buf) < size {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	r.f, r.step, r.n, r.line, r.chroma = ff, step, n, line, n*line
	r.seq, r.tCapture, r.matrix = f.Seq, f.TCapture, f.Matrix
	for i := 0; i < n; i++ {
		y := i * step
		copy(r.buf[i*line:(i+1)*line], f.Data[y*stride:])
		if ff.Pixel == sensors.NV12 {
			c := stride*ff.Height + (y/2)*stride
			copy(r.buf[r.chroma+i*line:r.chroma+(i+1)*line], f.Data[c:])
		}
	}
	return nil
}

// size is the picture's size: every step-th column of every kept row.
func (r *rows) size() (w, h int) {
	return (r.f.Width + r.step - 1) / r.step, r.n
}

// Colour matrices of YUV frames, as the pipeline's preprocessing reads
// them: BT.601 or BT.709, limited (Y 16..235) or full range.
type Matrix struct {
	BT709, FullRange bool
}

// yuvCoeffs are the fixed-point (×256) factors of R = Y' + rv·V,
// G = Y' − gu·U − gv·V, B = Y' + bu·U with Y' = ys·(Y − y0).
type yuvCoeffs struct{ y0, ys, rv, gu, gv, bu int32 }

func (m Matrix) coeffs() yuvCoeffs {
	switch {
	case !m.BT709 && !m.FullRange:
		return yuvCoeffs{16, 298, 409, 100, 208, 516}
	case m.BT709 && !m.FullRange:
		return yuvCoeffs{16, 298, 459, 55, 136, 541}
	case !m.BT709:
		return yuvCoeffs{0, 256, 359, 88, 183, 454}
	}
	return yuvCoeffs{0, 256, 403, 48, 120, 475}
}

func clamp8(v int32) uint8 {
	return uint8(min(max(v, 0), 255))
}

func (c *yuvCoeffs) rgb(y, u, v uint8, px []uint8) {
	l := c.ys*(int32(y)-c.y0) + 128
	d, e := int32(u)-128, int32(v)-128
	px[0], px[1], px[2], px[3] = clamp8((l+c.rv*e)>>8), clamp8((l-c.gu*d-c.gv*e)>>8), clamp8((l+c.bu*d)>>8), 0xff
}

// toRGBA converts the kept rows into img (which must be r.size()),
// picking every step-th column.
func (r *rows) toRGBA(img *image.RGBA) {
	w, h := r.size()
	c := r.matrix.coeffs()
	for i := 0; i < h; i++ {
		src := r.buf[i*r.line : (i+1)*r.line]
		dst := img.Pix[i*img.Stride : i*img.Stride+4*w]
		switch r.f.Pixel {
		case sensors.YUYV, sensors.UYVY:
			yo, uo, vo := 0, 1, 3 // YUYV: Y0 U Y1 V
			if r.f.Pixel == sensors.UYVY {
				yo, uo, vo = 1, 0, 2 // U Y0 V Y1
			}
			for x := 0; x < w; x++ {
				sx := x * r.step
				p := src[(sx&^1)*2 : (sx&^1)*2+4]
				c.rgb(p[yo+(sx&1)*2], p[uo], p[vo], dst[4*x:4*x+4])
			}
		case sensors.NV12:
			uv := r.buf[r.chroma+i*r.line : r.chroma+(i+1)*r.line]
			for x := 0; x < w; x++ {
				sx := x * r.step
				c.rgb(src[sx], uv[sx&^1], uv[(sx&^1)+1], dst[4*x:4*x+4])
			}
		case sensors.GREY:
			for x := 0; x < w; x++ {
				v := src[x*r.step]
				copy(dst[4*x:4*x+4], []byte{v, v, v, 0xff})
			}
		case sensors.RGB24, sensors.BGR24:
			ro, bo := 0, 2
			if r.f.Pixel == sensors.BGR24 {
				ro, bo = 2, 0
			}
			for x := 0; x < w; x++ {
				p := src[3*x*r.step : 3*x*r.step+3]
				copy(dst[4*x:4*x+4], []byte{p[ro], p[1], p[bo], 0xff})
			}
		}
	}
}
