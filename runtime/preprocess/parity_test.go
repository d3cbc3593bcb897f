package preprocess

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

var imageNet = struct{ mean, std [3]float32 }{[3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}}

// variants covers the colour, channel, layout and dtype options; the
// parity tests combine them with every format, resize and filter.
var variants = []Options{
	{Matrix: BT601, Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3}},
	{Matrix: BT709, BGR: true, Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3, NHWC: true}},
	{Matrix: BT601, FullRange: true, Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3, Half: true}},
	{Matrix: BT709, FullRange: true, BGR: true, Out: Output{C: 3, NHWC: true, Half: true}},
	{Matrix: BT601, Mean: [3]float32{0.5}, Std: [3]float32{0.25}, Out: Output{C: 1}},
	{Matrix: BT709, FullRange: true, Out: Output{C: 1, NHWC: true, Half: true}},
	{Scale: 1, Out: Output{C: 3}}, // values in [0, 255]
	{Matrix: BT709, BGR: true, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, Out: Output{C: 3, Half: true}},
}

func variantName(o Options) string {
	s := fmt.Sprintf("%s/%s/%s", o.Resize, o.Filter, o.Matrix)
	if o.FullRange {
		s += "-full"
	}
	if o.BGR {
		s += "/bgr"
	}
	return s + "/" + o.Out.String()
}

// compareToReference runs the fast path and the reference on src and
// fails where they differ by more than one 8-bit step after normalisation
// (a[k]), or for float16 one half ulp if that is larger. It returns the
// largest difference in 8-bit steps.
func compareToReference(t *testing.T, o Options, src []byte, f sensors.Format) float64 {
	t.Helper()
	want := make([]byte, o.Out.Bytes())
	trWant, err := reference(src, f, o, want)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for _, simd := range simdModes() {
		setSIMD(t, simd)
		p, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, o.Out.Bytes())
		trGot, err := p.Run(src, f, got)
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if trGot != trWant {
			t.Errorf("%s: transform %+v, reference %+v", variantName(o), trGot, trWant)
		}
		worst = max(worst, compareOutputs(t, fmt.Sprintf("%s %s %s", f, variantName(o), simdName(simd)), o, got, want, 1))
	}
	return worst
}

// compareOutputs fails where got and want differ by more than steps 8-bit
// steps after normalisation (a[k]), or for float16 one half ulp if that is
// larger, and returns the largest difference in 8-bit steps.
func compareOutputs(t *testing.T, name string, o Options, got, want []byte, steps float64) float64 {
	t.Helper()
	a, _ := o.Affine()
	worst, bad := 0.0, 0
	out := o.Out
	for ch := 0; ch < out.C; ch++ {
		for y := 0; y < out.H; y++ {
			for x := 0; x < out.W; x++ {
				i := out.Index(ch, y, x)
				g, w := refGet(got, out, i), refGet(want, out, i)
				tol := steps * math.Abs(float64(a[ch]))
				if out.Half {
					tol = max(tol, halfULP(w))
				}
				d := math.Abs(float64(g - w))
				if !(d <= tol) { // NaN fails too
					if bad++; bad <= 5 {
						t.Errorf("%s: channel %d (%d,%d) = %v, want %v (tolerance %v)", name, ch, x, y, g, w, tol)
					}
				}
				worst = max(worst, d/math.Abs(float64(a[ch])))
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d values out of tolerance", name, bad)
	}
	return worst
}

// simdModes lists the fused pass's kernels this machine runs: the vector
// one where there is one (haveSIMD), and always the portable one.
func simdModes() []bool {
	if haveSIMD {
		return []bool{true, false}
	}
	return []bool{false}
}

func simdName(on bool) string {
	if on {
		return "vector"
	}
	return "portable"
}

// setSIMD selects the fused pass's kernel for Preprocessors made from now
// until the test ends.
func setSIMD(t *testing.T, on bool) {
	t.Helper()
	was := haveSIMD
	haveSIMD = on
	t.Cleanup(func() { haveSIMD = was })
}

// halfULP is the spacing of float16 values at v.
func halfULP(v float32) float64 {
	h := Half(float32(math.Abs(float64(v))))
	return float64(HalfToFloat(h+1) - HalfToFloat(h))
}

var yuvFormats = []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12}

var allFormats = []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.GREY, sensors.RGB24, sensors.BGR24}

// TestParityAllOptions: every format × resize × filter × variant, on a
// small noisy frame of odd width and height with padded lines.
func TestParityAllOptions(t *testing.T) {
	var worst [2]float64 // float32, float16
	for _, pf := range allFormats {
		f := sensors.Format{Width: 85, Height: 61, Pixel: pf, Stride: pf.PackedLine(86) + 3}
		src := noise(f, uint64(pf))
		for _, resize := range []string{Stretch, Letterbox} {
			for _, filter := range []string{Bilinear, Area} {
				for i, v := range variants {
					o := v
					o.Resize, o.Filter = resize, filter
					o.Out.H, o.Out.W = 24, 40
					o.Threads = 1 + i%3
					h := boolIndex(o.Out.Half)
					worst[h] = max(worst[h], compareToReference(t, o, src, f))
				}
			}
		}
	}
	t.Logf("largest difference: %.4f of an 8-bit step (float32), %.4f (float16)", worst[0], worst[1])
}

// TestParitySizes: every format × resize × filter on noisy and flat
// frames of awkward sizes (odd, strided, 1080p, upscaling, one axis
// growing while the other shrinks), rotating through the variants.
func TestParitySizes(t *testing.T) {
	type size struct {
		w, h, stride int // stride in pixels beyond the packed line
		ow, oh       int
	}
	sizes := []size{
		{642, 481, 0, 224, 224},
		{1920, 1080, 0, 224, 224},
		{64, 48, 0, 224, 224},
		{642, 481, 19, 224, 160},
		{641, 481, 7, 100, 90},
		{1920, 100, 0, 224, 224},
		{3840, 200, 0, 48, 20}, // footprints 80 pixels wide
	}
	if testing.Short() {
		sizes = sizes[:1]
	}
	n, worst := 0, [2]float64{}
	for _, s := range sizes {
		for _, pf := range allFormats {
			f := sensors.Format{Width: s.w, Height: s.h, Pixel: pf}
			if s.stride > 0 || s.w%2 == 1 {
				f.Stride = pf.PackedLine(s.w+1) + s.stride
			}
			frames := map[string][]byte{"noisy": noise(f, uint64(s.w*s.h)+uint64(pf)), "flat": flat(f)}
			for _, kind := range []string{"noisy", "flat"} {
				for _, resize := range []string{Stretch, Letterbox} {
					for _, filter := range []string{Bilinear, Area} {
						o := variants[n%len(variants)]
						n++
						o.Resize, o.Filter = resize, filter
						o.Out.H, o.Out.W = s.oh, s.ow
						o.Threads = 1 + n%4
						t.Run(fmt.Sprintf("%dx%d+%d/%s/%s/%s", s.w, s.h, f.Stride, pf, kind, variantName(o)), func(t *testing.T) {
							h := boolIndex(o.Out.Half)
							worst[h] = max(worst[h], compareToReference(t, o, frames[kind], f))
						})
					}
				}
			}
		}
	}
	t.Logf("largest difference: %.4f of an 8-bit step (float32), %.4f (float16)", worst[0], worst[1])
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestParity4KLetterboxHalf is the detector input of the benchmarks: 4K
// YUYV letterboxed into 3×640×640 float16.
func TestParity4KLetterboxHalf(t *testing.T) {
	if testing.Short() {
		t.Skip("4K reference")
	}
	f := sensors.Format{Width: 3840, Height: 2160, Pixel: sensors.YUYV}
	o := Options{Resize: Letterbox, Out: Output{C: 3, H: 640, W: 640, Half: true}}
	compareToReference(t, o, noise(f, 4), f)
}

// TestThreadsIdentical: splitting rows across threads does not change a
// single byte.
func TestThreadsIdentical(t *testing.T) {
	for _, pf := range allFormats {
		f := sensors.Format{Width: 642, Height: 481, Pixel: pf}
		src := noise(f, 7)
		for i, v := range variants {
			for _, filter := range []string{Bilinear, Area} {
				o := v
				o.Filter, o.Out.H, o.Out.W = filter, 161, 223
				if i%2 == 1 {
					o.Resize = Letterbox
				}
				var got [2][]byte
				for k, threads := range []int{1, 4} {
					o.Threads = threads
					p, err := New(o)
					if err != nil {
						t.Fatal(err)
					}
					got[k] = make([]byte, o.Out.Bytes())
					for range 2 { // the second frame runs on cached tables
						if _, err := p.Run(src, f, got[k]); err != nil {
							t.Fatal(err)
						}
					}
					if threads > 1 && len(p.plan.chunks) == 1 {
						t.Fatalf("%s %s: one chunk", f, variantName(o))
					}
					p.Close()
				}
				if !bytes.Equal(got[0], got[1]) {
					t.Errorf("%s %s: threads 1 and 4 differ", f, variantName(o))
				}
			}
		}
	}
}

// TestFormatChange: one Preprocessor fed frames of changing formats and
// sizes rebuilds its tables each time and stays exact.
func TestFormatChange(t *testing.T) {
	o := Options{Resize: Letterbox, Out: Output{C: 3, H: 64, W: 64}, Threads: 2}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, f := range []sensors.Format{
		{Width: 640, Height: 480, Pixel: sensors.YUYV},
		{Width: 320, Height: 240, Pixel: sensors.NV12},
		{Width: 320, Height: 240, Pixel: sensors.NV12, Stride: 384},
		{Width: 640, Height: 480, Pixel: sensors.YUYV},
	} {
		src := noise(f, uint64(i))
		got, want := make([]byte, o.Out.Bytes()), make([]byte, o.Out.Bytes())
		if _, err := p.Run(src, f, got); err != nil {
			t.Fatal(err)
		}
		if _, err := reference(src, f, p.Options(), want); err != nil {
			t.Fatal(err)
		}
		a, _ := o.Affine()
		for j := 0; j < o.Out.C*o.Out.H*o.Out.W; j++ {
			if d := math.Abs(float64(refGet(got, o.Out, j) - refGet(want, o.Out, j))); d > float64(a[0]) {
				t.Fatalf("frame %d (%s): element %d differs by %v", i, f, j, d)
			}
		}
	}
}

// TestFusedMatchesRowCache: the fused pass (YUV, 3 channels, shrinking 2×
// or more vertically) writes the same values as the horizontal passes with
// the row cache and the vertical blend.
func TestFusedMatchesRowCache(t *testing.T) {
	setSIMD(t, false) // the same fixed-point arithmetic; TestVectorMatchesPortable covers the vector kernel
	for _, pf := range yuvFormats {
		f := sensors.Format{Width: 642, Height: 481, Pixel: pf, Stride: pf.PackedLine(642) + 10}
		src := noise(f, 5)
		for _, v := range variants {
			if v.Out.C != 3 {
				continue
			}
			o := v
			o.Resize, o.Out.H, o.Out.W, o.Threads = Letterbox, 160, 200, 2
			var got [2][]byte
			for k := range got {
				p, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				got[k] = make([]byte, o.Out.Bytes())
				if _, err := p.Run(src, f, got[k]); err != nil {
					t.Fatal(err)
				}
				if !p.plan.fused {
					t.Fatalf("%s %s: not fused", f, variantName(o))
				}
				if k == 1 {
					p.plan.fused = false
					if _, err := p.Run(src, f, got[k]); err != nil {
						t.Fatal(err)
					}
				}
				p.Close()
			}
			// The same arithmetic in another order: equal up to float
			// rounding (on arm64 Go fuses multiply-adds, so the two loop
			// shapes round differently in the last bit).
			a, b := decode(got[0], o.Out), decode(got[1], o.Out)
			for i := range a {
				tol := 1e-5 * max(1, math.Abs(float64(b[i])))
				if o.Out.Half {
					tol += halfULP(b[i])
				}
				if d := math.Abs(float64(a[i] - b[i])); d > tol {
					t.Errorf("%s %s: element %d: fused %v, row cache %v", f, variantName(o), i, a[i], b[i])
					break
				}
			}
		}
	}
}
