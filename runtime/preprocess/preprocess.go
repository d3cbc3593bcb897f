package preprocess

import (
	"fmt"
	"math"

	"github.com/edged-dev/edged/sensors"
)

// Preprocessor converts frames of one pipeline.
type Preprocessor struct {
	opt  Options
	a, b [3]float32 // out = v*a + b per output channel

	// cached tables for the last geometry
	key            [5]int
	xs             []tap // per destination column inside the image area
	ys             []tap // per destination row inside the image area
	x0, x1, y0, y1 int   // image area in the destination
	tr             Transform
}

type tap struct {
	i0, i1 int
	w      float32 // weight of i1
}

// New returns a Preprocessor. Zero Scale and Std are replaced by 1/255 and 1.
func New(o Options) *Preprocessor {
	if o.Scale == 0 {
		o.Scale = 1.0 / 255
	}
	p := &Preprocessor{opt: o}
	for c := 0; c < 3; c++ {
		std := o.Std[c]
		if std == 0 {
			std = 1
		}
		p.a[c] = o.Scale / std
		p.b[c] = -o.Mean[c] / std
	}
	return p
}

// Run converts one frame (src holds at least f.FrameSize() bytes) into dst,
// a planar tensor of c channels (1 or 3), h rows and w columns.
func (p *Preprocessor) Run(src []byte, f sensors.Format, dst []float32, c, h, w int) (Transform, error) {
	if c != 1 && c != 3 {
		return Transform{}, fmt.Errorf("%w: %d channels (want 1 or 3)", ErrUnsupported, c)
	}
	if len(dst) < c*h*w {
		return Transform{}, fmt.Errorf("preprocess: tensor holds %d values, need %d", len(dst), c*h*w)
	}
	if f.Width <= 0 || f.Height <= 0 {
		return Transform{}, fmt.Errorf("preprocess: bad frame size %dx%d", f.Width, f.Height)
	}
	if need := f.FrameSize(); f.Pixel != sensors.MJPEG && len(src) < need {
		return Transform{}, fmt.Errorf("preprocess: frame has %d bytes, %s needs %d", len(src), f, need)
	}
	if err := validFormat(f); err != nil {
		return Transform{}, err
	}
	p.plan(f.Width, f.Height, w, h)
	plane := h * w
	chans := [3]int{0, 1, 2}
	if p.opt.BGR {
		chans = [3]int{2, 1, 0}
	}
	// Padding (letterbox) rows and columns.
	if p.x0 > 0 || p.y0 > 0 || p.x1 < w || p.y1 < h {
		for ch := 0; ch < c; ch++ {
			k := chans[ch]
			if c == 1 {
				k = 0
			}
			v := PadValue*p.a[k] + p.b[k]
			out := dst[ch*plane : (ch+1)*plane]
			for y := 0; y < h; y++ {
				row := out[y*w : (y+1)*w]
				if y < p.y0 || y >= p.y1 {
					for x := range row {
						row[x] = v
					}
					continue
				}
				for x := 0; x < p.x0; x++ {
					row[x] = v
				}
				for x := p.x1; x < w; x++ {
					row[x] = v
				}
			}
		}
	}
	stride := f.LineBytes()
	switch f.Pixel {
	case sensors.RGB24:
		sample(p, rgbAt{}, src, stride, f.Height, dst, c, w, chans)
	case sensors.BGR24:
		sample(p, bgrAt{}, src, stride, f.Height, dst, c, w, chans)
	case sensors.GREY:
		sample(p, greyAt{}, src, stride, f.Height, dst, c, w, chans)
	case sensors.YUYV:
		sample(p, yuyvAt{}, src, stride, f.Height, dst, c, w, chans)
	case sensors.UYVY:
		sample(p, uyvyAt{}, src, stride, f.Height, dst, c, w, chans)
	case sensors.NV12:
		sample(p, nv12At{}, src, stride, f.Height, dst, c, w, chans)
	}
	return p.tr, nil
}

func lerp2(v00, v01, v10, v11, wx, wy float32) float32 {
	top := v00 + (v01-v00)*wx
	bot := v10 + (v11-v10)*wx
	return top + (bot-top)*wy
}

// plan computes the sampling tables for a geometry, once.
func (p *Preprocessor) plan(sw, sh, dw, dh int) {
	mode := 0
	if p.opt.Resize == Letterbox {
		mode = 1
	}
	key := [5]int{sw, sh, dw, dh, mode}
	if key == p.key && p.xs != nil {
		return
	}
	p.key = key
	iw, ih := dw, dh
	p.x0, p.y0 = 0, 0
	sx, sy := float64(dw)/float64(sw), float64(dh)/float64(sh)
	if mode == 1 {
		r := math.Min(sx, sy)
		iw = max(1, min(dw, int(math.Round(float64(sw)*r))))
		ih = max(1, min(dh, int(math.Round(float64(sh)*r))))
		p.x0, p.y0 = (dw-iw)/2, (dh-ih)/2
		sx, sy = float64(iw)/float64(sw), float64(ih)/float64(sh)
	}
	p.x1, p.y1 = p.x0+iw, p.y0+ih
	p.xs = taps(p.xs, sw, iw)
	p.ys = taps(p.ys, sh, ih)
	p.tr = Transform{ScaleX: float32(sx), ScaleY: float32(sy), PadX: float32(p.x0), PadY: float32(p.y0)}
}

// taps samples n source pixels at m evenly spaced centres.
func taps(buf []tap, n, m int) []tap {
	buf = buf[:0]
	r := float64(n) / float64(m)
	for i := 0; i < m; i++ {
		s := (float64(i)+0.5)*r - 0.5
		if s < 0 {
			s = 0
		}
		i0 := int(s)
		if i0 > n-1 {
			i0 = n - 1
		}
		i1 := min(i0+1, n-1)
		buf = append(buf, tap{i0: i0, i1: i1, w: float32(s - float64(i0))})
	}
	return buf
}

// pixelAt reads one source pixel as RGB in [0, 255]. Each pixel format is
// its own type so that sample is compiled once per format with the read
// inlined.
type pixelAt interface {
	at(src []byte, stride, height, x, y int) (r, g, b float32)
}

func validFormat(f sensors.Format) error {
	switch f.Pixel {
	case sensors.RGB24, sensors.BGR24, sensors.GREY, sensors.YUYV, sensors.UYVY, sensors.NV12:
		return nil
	}
	return fmt.Errorf("%w: pixel format %s (MJPEG must be decoded by the source)", ErrUnsupported, f.Pixel)
}

// sample fills the image area of dst with bilinear samples of src.
func sample[P pixelAt](p *Preprocessor, px P, src []byte, stride, height int, dst []float32, c, w int, chans [3]int) {
	plane := len(dst) / c
	a, b := p.a, p.b
	for y := p.y0; y < p.y1; y++ {
		ty := p.ys[y-p.y0]
		row := y * w
		for x := p.x0; x < p.x1; x++ {
			tx := p.xs[x-p.x0]
			r00, g00, b00 := px.at(src, stride, height, tx.i0, ty.i0)
			r01, g01, b01 := px.at(src, stride, height, tx.i1, ty.i0)
			r10, g10, b10 := px.at(src, stride, height, tx.i0, ty.i1)
			r11, g11, b11 := px.at(src, stride, height, tx.i1, ty.i1)
			r := lerp2(r00, r01, r10, r11, tx.w, ty.w)
			g := lerp2(g00, g01, g10, g11, tx.w, ty.w)
			bl := lerp2(b00, b01, b10, b11, tx.w, ty.w)
			o := row + x
			if c == 1 {
				dst[o] = (0.299*r+0.587*g+0.114*bl)*a[0] + b[0]
				continue
			}
			rgb := [3]float32{r, g, bl}
			k0, k1, k2 := chans[0], chans[1], chans[2]
			dst[o] = rgb[k0]*a[k0] + b[k0]
			dst[plane+o] = rgb[k1]*a[k1] + b[k1]
			dst[2*plane+o] = rgb[k2]*a[k2] + b[k2]
		}
	}
}

type rgbAt struct{}

func (rgbAt) at(src []byte, stride, _, x, y int) (float32, float32, float32) {
	o := y*stride + 3*x
	return float32(src[o]), float32(src[o+1]), float32(src[o+2])
}

type bgrAt struct{}

func (bgrAt) at(src []byte, stride, _, x, y int) (float32, float32, float32) {
	o := y*stride + 3*x
	return float32(src[o+2]), float32(src[o+1]), float32(src[o])
}

type greyAt struct{}

func (greyAt) at(src []byte, stride, _, x, y int) (float32, float32, float32) {
	v := float32(src[y*stride+x])
	return v, v, v
}

type yuyvAt struct{}

func (yuyvAt) at(src []byte, stride, _, x, y int) (float32, float32, float32) {
	o := y*stride + 4*(x>>1)
	return yuv(src[o+2*(x&1)], src[o+1], src[o+3])
}

type uyvyAt struct{}

func (uyvyAt) at(src []byte, stride, _, x, y int) (float32, float32, float32) {
	o := y*stride + 4*(x>>1)
	return yuv(src[o+1+2*(x&1)], src[o], src[o+2])
}

type nv12At struct{}

func (nv12At) at(src []byte, stride, height, x, y int) (float32, float32, float32) {
	uv := stride*height + (y>>1)*stride + 2*(x>>1)
	return yuv(src[y*stride+x], src[uv], src[uv+1])
}

// yuv converts BT.601 limited-range YCbCr to RGB in [0, 255].
func yuv(y, u, v byte) (float32, float32, float32) {
	c := 1.164383 * (float32(y) - 16)
	d := float32(u) - 128
	e := float32(v) - 128
	return clamp255(c + 1.596027*e), clamp255(c - 0.391762*d - 0.812968*e), clamp255(c + 2.017232*d)
}
