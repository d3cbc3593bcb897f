package preprocess

import (
	"encoding/binary"
	"math"

	"github.com/edged-dev/edged/sensors"
)

// reference computes the function Options defines, written for clarity
// rather than speed: every output pixel is the Taps-weighted sum of source
// pixels converted one by one with Coeffs.RGB, then channel selection (or
// luma), then Affine. The fast path and the GPU kernels are tested
// against it. dst receives the tensor in native byte order.
func reference(src []byte, f sensors.Format, o Options, dst []byte) (Transform, error) {
	if err := o.Validate(); err != nil {
		return Transform{}, err
	}
	if err := checkFrame(src, f); err != nil {
		return Transform{}, err
	}
	if err := checkTensor(dst, o.Out); err != nil {
		return Transform{}, err
	}
	g := Place(f.Width, f.Height, o.Out.W, o.Out.H, o.Resize)
	xt := Taps(o.Filter, f.Width, g.X1-g.X0)
	yt := Taps(o.Filter, f.Height, g.Y1-g.Y0)
	a, b := o.Affine()
	px := refPixels{src: src, f: f, k: ColorCoeffs(o.Matrix, o.FullRange)}
	for y := 0; y < o.Out.H; y++ {
		for x := 0; x < o.Out.W; x++ {
			rgb := [3]float64{PadValue, PadValue, PadValue}
			if x >= g.X0 && x < g.X1 && y >= g.Y0 && y < g.Y1 {
				rgb = [3]float64{}
				for _, ty := range yt[y-g.Y0] {
					for _, tx := range xt[x-g.X0] {
						p := px.at(tx.Src, ty.Src)
						for k := range rgb {
							rgb[k] += ty.Weight * tx.Weight * float64(p[k])
						}
					}
				}
			}
			for ch := 0; ch < o.Out.C; ch++ {
				v := rgb[ch]
				switch {
				case o.Out.C == 1:
					v = 0.299*rgb[0] + 0.587*rgb[1] + 0.114*rgb[2]
				case o.BGR:
					v = rgb[2-ch]
				}
				refPut(dst, o.Out, o.Out.Index(ch, y, x), float32(v)*a[ch]+b[ch])
			}
		}
	}
	return g.Transform, nil
}

// refPut stores element i of the tensor in native byte order.
func refPut(dst []byte, out Output, i int, v float32) {
	if out.Half {
		binary.NativeEndian.PutUint16(dst[2*i:], Half(v))
		return
	}
	binary.NativeEndian.PutUint32(dst[4*i:], math.Float32bits(v))
}

// refGet reads element i of a tensor written in native byte order.
func refGet(dst []byte, out Output, i int) float32 {
	if out.Half {
		return HalfToFloat(binary.NativeEndian.Uint16(dst[2*i:]))
	}
	return math.Float32frombits(binary.NativeEndian.Uint32(dst[4*i:]))
}

// refPixels reads one source pixel as RGB in [0, 255].
type refPixels struct {
	src []byte
	f   sensors.Format
	k   Coeffs
}

func (p refPixels) at(x, y int) [3]float32 {
	s := p.f.LineBytes()
	row := p.src[y*s:]
	var Y, U, V uint8
	switch p.f.Pixel {
	case sensors.RGB24:
		return [3]float32{float32(row[3*x]), float32(row[3*x+1]), float32(row[3*x+2])}
	case sensors.BGR24:
		return [3]float32{float32(row[3*x+2]), float32(row[3*x+1]), float32(row[3*x])}
	case sensors.GREY:
		v := float32(row[x])
		return [3]float32{v, v, v}
	case sensors.YUYV: // Y0 U Y1 V
		m := row[4*(x/2):]
		Y, U, V = m[2*(x%2)], m[1], m[3]
	case sensors.UYVY: // U Y0 V Y1
		m := row[4*(x/2):]
		Y, U, V = m[1+2*(x%2)], m[0], m[2]
	case sensors.NV12: // Y plane, then interleaved UV at half height
		uv := p.src[s*p.f.Height+(y/2)*s+2*(x/2):]
		Y, U, V = row[x], uv[0], uv[1]
	default:
		panic("reference: unchecked pixel format")
	}
	r, g, b := p.k.RGB(Y, U, V)
	return [3]float32{r, g, b}
}
