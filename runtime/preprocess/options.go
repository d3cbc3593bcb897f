package preprocess

import (
	"fmt"
	"math"
)

// Resize modes.
const (
	Stretch   = "stretch"
	Letterbox = "letterbox"
)

// Filters.
const (
	// Bilinear reads the 2×2 source pixels around each sample centre (the
	// OpenCV INTER_LINEAR rule: centre (i+0.5)·r − 0.5, clamped to the
	// image). It aliases when the image shrinks by more than about 2×.
	Bilinear = "bilinear"
	// Area averages every source pixel under the destination pixel's
	// footprint [i·r, (i+1)·r), edge pixels weighted by their overlap (the
	// OpenCV INTER_AREA rule). The filter is separable and chosen per
	// axis: along an axis where the image grows or keeps its size (r ≤ 1)
	// that axis uses the Bilinear taps.
	Area = "area"
)

// Colour matrices for YUV sources.
const (
	BT601 = "bt601"
	BT709 = "bt709"
)

// PadValue is the grey (in 8-bit units) letterboxing pads with.
const PadValue = 114

// Output describes the engine input tensor a Preprocessor writes: C
// channels (1 or 3), H rows, W columns, planar (NCHW) or interleaved
// (NHWC), float32 or float16 (IEEE binary16, round to nearest even).
type Output struct {
	C, H, W int
	NHWC    bool
	Half    bool
}

// ElemSize is the size of one element in bytes.
func (o Output) ElemSize() int {
	if o.Half {
		return 2
	}
	return 4
}

// Bytes is the size of the tensor in bytes.
func (o Output) Bytes() int { return o.C * o.H * o.W * o.ElemSize() }

// Index is the element index of channel ch at row y, column x.
func (o Output) Index(ch, y, x int) int {
	if o.NHWC {
		return (y*o.W+x)*o.C + ch
	}
	return ch*o.H*o.W + y*o.W + x
}

func (o Output) String() string {
	l, t := "NCHW", "float32"
	if o.NHWC {
		l = "NHWC"
	}
	if o.Half {
		t = "float16"
	}
	return fmt.Sprintf("%s %s [%d,%d,%d]", t, l, o.C, o.H, o.W)
}

// Options configure a Preprocessor. Every implementation (the CPU
// reference, the fast CPU path, the GPU kernels) computes the same
// function of the frame, defined here:
//
//  1. Each source pixel becomes RGB in [0, 255]: YUV through Matrix
//     (BT.601 or BT.709) in limited range (Y 16..235, C 16..240) or, with
//     FullRange, full range (JPEG), each channel clamped to [0, 255]; GREY
//     is r = g = b = Y.
//  2. The image is resized into the output (Geometry: stretch, or
//     letterbox centred with PadValue around it) with Filter, per RGB
//     channel, after the conversion.
//  3. Output channel j holds RGB channel j, or 2 − j with BGR; a
//     1-channel output holds the luma 0.299 r + 0.587 g + 0.114 b.
//  4. Output channel j becomes v·Scale/Std[j] − Mean[j]/Std[j] (Affine):
//     Mean and Std are in the engine's channel order (B, G, R with BGR),
//     as model cards and DeepStream's offsets give them.
type Options struct {
	Resize    string // Stretch (default) or Letterbox
	Filter    string // Bilinear (default) or Area
	Matrix    string // BT601 (default) or BT709; YUV sources only
	FullRange bool   // YUV is full range (0..255) instead of limited
	BGR       bool   // write channels in B, G, R order
	Scale     float32
	Mean      [3]float32
	Std       [3]float32
	Out       Output
	// Threads is the number of goroutines the CPU path splits rows across;
	// 0 picks min(GOMAXPROCS, 4), 1 runs on the caller's goroutine.
	Threads int
}

// Validate reports the first problem with the options.
func (o Options) Validate() error {
	switch o.Resize {
	case "", Stretch, Letterbox:
	default:
		return fmt.Errorf("%w: resize %q (want %q or %q)", ErrUnsupported, o.Resize, Stretch, Letterbox)
	}
	switch o.Filter {
	case "", Bilinear, Area:
	default:
		return fmt.Errorf("%w: filter %q (want %q or %q)", ErrUnsupported, o.Filter, Bilinear, Area)
	}
	switch o.Matrix {
	case "", BT601, BT709:
	default:
		return fmt.Errorf("%w: colour matrix %q (want %q or %q)", ErrUnsupported, o.Matrix, BT601, BT709)
	}
	if o.Out.C != 1 && o.Out.C != 3 {
		return fmt.Errorf("%w: %d channels (want 1 or 3)", ErrUnsupported, o.Out.C)
	}
	if o.Out.H <= 0 || o.Out.W <= 0 {
		return fmt.Errorf("%w: output %dx%d", ErrUnsupported, o.Out.W, o.Out.H)
	}
	if o.Threads < 0 {
		return fmt.Errorf("%w: %d threads", ErrUnsupported, o.Threads)
	}
	return nil
}

// Affine returns the normalisation out = v·a[j] + b[j] of output channel
// j (the engine's channel order). Zero Scale means 1/255 and zero Std
// means 1.
func (o Options) Affine() (a, b [3]float32) {
	scale := o.Scale
	if scale == 0 {
		scale = 1.0 / 255
	}
	for k := 0; k < 3; k++ {
		std := o.Std[k]
		if std == 0 {
			std = 1
		}
		a[k] = scale / std
		b[k] = -o.Mean[k] / std
	}
	return a, b
}

// Coeffs convert one YUV pixel to RGB in [0, 255] before clamping:
//
//	c = (Y − YOff)·YGain, d = U − 128, e = V − 128
//	r = c + RV·e, g = c − GU·d − GV·e, b = c + BU·d
type Coeffs struct {
	YOff, YGain    float32
	RV, GU, GV, BU float32
}

// ColorCoeffs returns the conversion for a matrix (BT601 when "") and range.
func ColorCoeffs(matrix string, full bool) Coeffs {
	kr, kb := 0.299, 0.114
	if matrix == BT709 {
		kr, kb = 0.2126, 0.0722
	}
	kg := 1 - kr - kb
	yoff, ygain, cgain := 16.0, 255.0/219, 255.0/224
	if full {
		yoff, ygain, cgain = 0, 1, 1
	}
	return Coeffs{
		YOff: float32(yoff), YGain: float32(ygain),
		RV: float32(2 * (1 - kr) * cgain),
		GU: float32(2 * (1 - kb) * kb / kg * cgain),
		GV: float32(2 * (1 - kr) * kr / kg * cgain),
		BU: float32(2 * (1 - kb) * cgain),
	}
}

// RGB converts one YUV pixel to RGB in [0, 255], clamped: the reference
// conversion every path reproduces.
func (k Coeffs) RGB(y, u, v uint8) (r, g, b float32) {
	c := (float32(y) - k.YOff) * k.YGain
	d := float32(u) - 128
	e := float32(v) - 128
	return clamp255(c + k.RV*e), clamp255(c - k.GU*d - k.GV*e), clamp255(c + k.BU*d)
}

func clamp255(v float32) float32 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return v
}

// Geometry is where the image lands in the output and how tensor
// coordinates map back to the source.
type Geometry struct {
	// The image covers columns X0..X1-1 and rows Y0..Y1-1 of the output;
	// the rest is padding (letterbox).
	X0, Y0, X1, Y1 int
	Transform      Transform
}

// Place computes the geometry of an sw×sh source in a dw×dh output.
// Letterbox scales by the smaller ratio, rounds the image size and centres
// it (the left/top pad is the floor of half the padding).
func Place(sw, sh, dw, dh int, resize string) Geometry {
	iw, ih := dw, dh
	x0, y0 := 0, 0
	sx, sy := float64(dw)/float64(sw), float64(dh)/float64(sh)
	if resize == Letterbox {
		r := math.Min(sx, sy)
		iw = max(1, min(dw, int(math.Round(float64(sw)*r))))
		ih = max(1, min(dh, int(math.Round(float64(sh)*r))))
		x0, y0 = (dw-iw)/2, (dh-ih)/2
		sx, sy = float64(iw)/float64(sw), float64(ih)/float64(sh)
	}
	return Geometry{X0: x0, Y0: y0, X1: x0 + iw, Y1: y0 + ih,
		Transform: Transform{ScaleX: float32(sx), ScaleY: float32(sy), PadX: float32(x0), PadY: float32(y0)}}
}

// Transform maps tensor coordinates back to source pixels:
// src = (dst - Pad) / Scale.
type Transform struct {
	ScaleX, ScaleY float32
	PadX, PadY     float32
}

// ToSource maps a point in tensor pixels to source image pixels.
func (t Transform) ToSource(x, y float32) (float32, float32) {
	return (x - t.PadX) / t.ScaleX, (y - t.PadY) / t.ScaleY
}

// Half converts a float32 to IEEE binary16 bits, rounding to nearest even
// (what the GPU's cvt.rn.f16.f32 does); out-of-range values become ±Inf.
func Half(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127+15 >= 0x1f: // overflow
		return sign | 0x7c00
	case exp-127+15 <= 0: // subnormal or zero in half
		e := exp - 127 + 15
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - e)
		h := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp-127+15)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent: correct, up to Inf
	}
	return sign | uint16(h)
}

// HalfToFloat converts IEEE binary16 bits to float32.
func HalfToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(man) / 1024 / 16384 // 2^-14 · man/1024
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Tap is one source pixel's share of a destination pixel along one axis.
type Tap struct {
	Src    int     // source pixel index, 0..n-1
	Weight float64 // the taps of one destination pixel sum to 1
}

// Taps spells out Filter along one axis: for each of m destination pixels
// over n source pixels (r = n/m), the source pixels it reads and their
// weights. The 2-D filter is separable: a destination pixel is the sum over
// its row taps and column taps of wy·wx·pixel.
//
// Bilinear: centre s = (i+0.5)·r − 0.5 clamped to [0, n−1], taps
// ⌊s⌋ (weight 1 − f) and ⌊s⌋+1 (weight f, f = s − ⌊s⌋), one tap where
// they coincide at the edge or f is 0.
//
// Area with r > 1: every source pixel s overlapping [i·r, (i+1)·r),
// weighted by its overlap / r (exact: computed in units of 1/m). With
// r ≤ 1 on this axis Area is Bilinear.
func Taps(filter string, n, m int) [][]Tap {
	taps := make([][]Tap, m)
	if filter == Area && n > m {
		for i := range taps {
			lo, hi := i*n, (i+1)*n // footprint in units of 1/m
			for s := lo / m; s*m < hi; s++ {
				ov := min(hi, (s+1)*m) - max(lo, s*m)
				if ov > 0 {
					taps[i] = append(taps[i], Tap{Src: s, Weight: float64(ov) / float64(n)})
				}
			}
		}
		return taps
	}
	r := float64(n) / float64(m)
	for i := range taps {
		s := min(max((float64(i)+0.5)*r-0.5, 0), float64(n-1))
		i0 := int(s)
		f := s - float64(i0)
		if f == 0 || i0+1 >= n {
			taps[i] = []Tap{{Src: i0, Weight: 1}}
			continue
		}
		taps[i] = []Tap{{Src: i0, Weight: 1 - f}, {Src: i0 + 1, Weight: f}}
	}
	return taps
}
