package preprocess

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// rgbToYUV is BT.601 limited range, the inverse of yuv().
func rgbToYUV(r, g, b uint8) (y, u, v uint8) {
	rf, gf, bf := float64(r), float64(g), float64(b)
	yf := 16 + 0.256788*rf + 0.504129*gf + 0.097906*bf
	uf := 128 - 0.148223*rf - 0.290993*gf + 0.439216*bf
	vf := 128 + 0.439216*rf - 0.367788*gf - 0.071427*bf
	c := func(x float64) uint8 { return uint8(math.Max(0, math.Min(255, math.Round(x)))) }
	return c(yf), c(uf), c(vf)
}

// render draws an image given by colorAt into a frame of format f.
func render(f sensors.Format, colorAt func(x, y int) [3]uint8) []byte {
	buf := make([]byte, f.FrameSize())
	s := f.LineBytes()
	for y := 0; y < f.Height; y++ {
		for x := 0; x < f.Width; x++ {
			c := colorAt(x, y)
			switch f.Pixel {
			case sensors.RGB24:
				copy(buf[y*s+3*x:], c[:])
			case sensors.BGR24:
				buf[y*s+3*x], buf[y*s+3*x+1], buf[y*s+3*x+2] = c[2], c[1], c[0]
			case sensors.GREY:
				buf[y*s+x] = c[0]
			case sensors.YUYV, sensors.UYVY, sensors.NV12:
				Y, U, V := rgbToYUV(c[0], c[1], c[2])
				switch f.Pixel {
				case sensors.YUYV:
					o := y*s + 4*(x/2)
					buf[o+2*(x%2)] = Y
					buf[o+1], buf[o+3] = U, V
				case sensors.UYVY:
					o := y*s + 4*(x/2)
					buf[o+1+2*(x%2)] = Y
					buf[o], buf[o+2] = U, V
				case sensors.NV12:
					buf[y*s+x] = Y
					o := s*f.Height + (y/2)*s + 2*(x/2)
					buf[o], buf[o+1] = U, V
				}
			}
		}
	}
	return buf
}

// runFast converts one frame with a new Preprocessor and returns the
// tensor as float32 values.
func runFast(t testing.TB, o Options, src []byte, f sensors.Format) ([]float32, Transform) {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dst := make([]byte, o.Out.Bytes())
	tr, err := p.Run(src, f, dst)
	if err != nil {
		t.Fatal(err)
	}
	return decode(dst, o.Out), tr
}

// decode reads a tensor written in native byte order.
func decode(dst []byte, out Output) []float32 {
	v := make([]float32, out.C*out.H*out.W)
	for i := range v {
		v[i] = refGet(dst, out, i)
	}
	return v
}

func TestSolidColourEveryFormat(t *testing.T) {
	colour := [3]uint8{200, 30, 30}
	for _, pf := range []sensors.PixelFormat{sensors.RGB24, sensors.BGR24, sensors.YUYV, sensors.UYVY, sensors.NV12} {
		for _, filter := range []string{Bilinear, Area} {
			t.Run(pf.String()+"/"+filter, func(t *testing.T) {
				f := sensors.Format{Width: 64, Height: 48, Pixel: pf}
				src := render(f, func(int, int) [3]uint8 { return colour })
				out := Output{C: 3, H: 16, W: 16}
				dst, _ := runFast(t, Options{Filter: filter, Out: out}, src, f)
				tol := float32(0.5 / 255)
				if pf == sensors.YUYV || pf == sensors.UYVY || pf == sensors.NV12 {
					tol = 3.0 / 255 // 8-bit YCbCr round trip
				}
				for ch := 0; ch < 3; ch++ {
					want := float32(colour[ch]) / 255
					for i := 0; i < 16*16; i++ {
						if got := dst[ch*256+i]; math.Abs(float64(got-want)) > float64(tol) {
							t.Fatalf("channel %d pixel %d = %v, want %v ± %v", ch, i, got, want, tol)
						}
					}
				}
			})
		}
	}
}

func TestGreyAndSingleChannel(t *testing.T) {
	f := sensors.Format{Width: 8, Height: 8, Pixel: sensors.GREY}
	src := render(f, func(x, y int) [3]uint8 { return [3]uint8{uint8(x * 30), 0, 0} })
	out := Output{C: 1, H: 8, W: 8}
	dst, _ := runFast(t, Options{Scale: 1, Out: out}, src, f)
	for x := 0; x < 8; x++ {
		if got := dst[out.Index(0, 3, x)]; math.Abs(float64(got-float32(x*30))) > 0.01 {
			t.Errorf("x=%d: %v, want %d", x, got, x*30)
		}
	}
}

func TestLumaWeights(t *testing.T) {
	f := sensors.Format{Width: 8, Height: 8, Pixel: sensors.RGB24}
	for _, c := range [][3]uint8{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 200, 90}} {
		src := render(f, func(int, int) [3]uint8 { return c })
		for _, filter := range []string{Bilinear, Area} {
			out := Output{C: 1, H: 3, W: 3}
			dst, _ := runFast(t, Options{Filter: filter, Scale: 1, Out: out}, src, f)
			want := 0.299*float64(c[0]) + 0.587*float64(c[1]) + 0.114*float64(c[2])
			for i, got := range dst {
				if math.Abs(float64(got)-want) > 0.01 {
					t.Errorf("%v %s pixel %d: luma %v, want %v", c, filter, i, got, want)
				}
			}
		}
	}
}

// TestRowsFilteredOnce: each source row the vertical pass reads is
// filtered horizontally once per chunk, also where consecutive output rows
// share rows (upscaling, and area footprints sharing an edge row).
func TestRowsFilteredOnce(t *testing.T) {
	for _, c := range []struct {
		w, h, ow, oh int
		filter       string
	}{
		{64, 48, 224, 224, Bilinear},   // upscale: rows shared by several output rows
		{640, 480, 224, 300, Bilinear}, // 1.6×: a row shared by two output rows
		{640, 480, 224, 224, Bilinear}, // 2.14×: fused, some rows single-tap
		{640, 480, 224, 224, Area},
		{640, 480, 64, 300, Area},
	} {
		f := sensors.Format{Width: c.w, Height: c.h, Pixel: sensors.YUYV}
		for _, threads := range []int{1, 3} {
			p, err := New(Options{Filter: c.filter, Threads: threads, Out: Output{C: 3, H: c.oh, W: c.ow}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Run(noise(f, 1), f, make([]byte, p.Options().Out.Bytes())); err != nil {
				t.Fatal(err)
			}
			filters := 0
			for _, w := range p.workers {
				filters += w.filters
			}
			rows := map[int32]bool{}
			for _, j := range p.plan.ySrc {
				rows[j] = true
			}
			// A row on a chunk boundary may be filtered for both chunks.
			if chunks := len(p.plan.chunks); filters < len(rows) || filters > len(rows)+2*(chunks-1) {
				t.Errorf("%+v threads %d: %d horizontal passes for %d distinct rows", c, threads, filters, len(rows))
			}
			p.Close()
		}
	}
}

// TestSmallFramesStayOnCaller: a frame with little work runs as one chunk
// on the caller; a large one is split for the workers.
func TestSmallFramesStayOnCaller(t *testing.T) {
	for _, c := range []struct {
		w, h, ow, oh int
		filter       string
		chunks       bool
	}{
		{640, 480, 64, 64, Bilinear, false},
		{64, 48, 224, 224, Bilinear, false},
		{1920, 1080, 224, 224, Bilinear, true},
		{640, 480, 64, 64, Area, true},
	} {
		f := sensors.Format{Width: c.w, Height: c.h, Pixel: sensors.YUYV}
		p, err := New(Options{Filter: c.filter, Threads: 4, Out: Output{C: 3, H: c.oh, W: c.ow}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(noise(f, 1), f, make([]byte, p.Options().Out.Bytes())); err != nil {
			t.Fatal(err)
		}
		if n := len(p.plan.chunks); (n > 1) != c.chunks {
			t.Errorf("%+v: %d chunks", c, n)
		}
		p.Close()
	}
}

func TestStretchKeepsLayout(t *testing.T) {
	// Left half red, right half blue; bottom quarter green.
	f := sensors.Format{Width: 640, Height: 480, Pixel: sensors.YUYV}
	src := render(f, func(x, y int) [3]uint8 {
		switch {
		case y >= 360:
			return [3]uint8{0, 255, 0}
		case x < 320:
			return [3]uint8{255, 0, 0}
		}
		return [3]uint8{0, 0, 255}
	})
	for _, nhwc := range []bool{false, true} {
		out := Output{C: 3, H: 64, W: 64, NHWC: nhwc}
		dst, _ := runFast(t, Options{Out: out}, src, f)
		check := func(x, y int, want [3]float32) {
			t.Helper()
			for ch := 0; ch < 3; ch++ {
				if got := dst[out.Index(ch, y, x)]; math.Abs(float64(got-want[ch])) > 0.03 {
					t.Errorf("%s (%d,%d) channel %d = %.3f, want %.3f", out, x, y, ch, got, want[ch])
				}
			}
		}
		check(5, 5, [3]float32{1, 0, 0})
		check(60, 5, [3]float32{0, 0, 1})
		check(30, 60, [3]float32{0, 1, 0})
	}
}

func TestLetterboxPadsAndMapsBack(t *testing.T) {
	f := sensors.Format{Width: 640, Height: 320, Pixel: sensors.RGB24}
	src := render(f, func(x, y int) [3]uint8 {
		if x >= 320 && x < 384 && y >= 128 && y < 192 {
			return [3]uint8{255, 255, 255}
		}
		return [3]uint8{0, 0, 0}
	})
	for _, half := range []bool{false, true} {
		out := Output{C: 3, H: 64, W: 64, Half: half}
		dst, tr := runFast(t, Options{Resize: Letterbox, Out: out}, src, f)
		// 640x320 -> 64x32 image area, 16 rows of padding above and below.
		if tr.PadY != 16 || tr.PadX != 0 || tr.ScaleX != 0.1 || tr.ScaleY != 0.1 {
			t.Fatalf("transform %+v", tr)
		}
		pad := float32(PadValue) / 255
		tol := 1e-5
		if half {
			tol = 1e-3
		}
		for _, y := range []int{0, 15, 48, 63} {
			for ch := 0; ch < 3; ch++ {
				if got := dst[out.Index(ch, y, 10)]; math.Abs(float64(got-pad)) > tol {
					t.Errorf("%s: row %d channel %d not padded: %v", out, y, ch, got)
				}
			}
		}
		if got := dst[out.Index(0, 16, 10)]; got > 0.01 {
			t.Errorf("%s: first image row = %v, want black", out, got)
		}
		// The white block is at source (320..384, 128..192): tensor (32..38, 16+12.8..16+19.2).
		if got := dst[out.Index(0, 16+16, 35)]; got < 0.99 {
			t.Errorf("%s: block centre = %v, want white", out, got)
		}
		sx, sy := tr.ToSource(35.2, 16+16)
		if math.Abs(float64(sx-352)) > 0.01 || math.Abs(float64(sy-160)) > 0.01 {
			t.Errorf("ToSource = %v,%v want 352,160", sx, sy)
		}
	}
}

// TestNormaliseAndBGR: Mean and Std follow the engine's channels (B, G, R
// with BGR); luma is normalised with index 0; letterbox padding goes
// through the same normalisation. Both the fast path and the reference.
func TestNormaliseAndBGR(t *testing.T) {
	f := sensors.Format{Width: 8, Height: 4, Pixel: sensors.RGB24}
	src := render(f, func(int, int) [3]uint8 { return [3]uint8{255, 128, 0} })
	mean, std := [3]float32{0.406, 0.456, 0.485}, [3]float32{0.225, 0.224, 0.229}
	norm := func(v float32, j int) float32 { return (v/255 - mean[j]) / std[j] }
	for _, c := range []struct {
		out  Output
		bgr  bool
		want [3]float32 // image pixel per output channel
		pad  [3]float32
	}{
		{Output{C: 3, H: 8, W: 8}, true, // B, G, R, each with its own mean/std
			[3]float32{norm(0, 0), norm(128, 1), norm(255, 2)},
			[3]float32{norm(PadValue, 0), norm(PadValue, 1), norm(PadValue, 2)}},
		{Output{C: 3, H: 8, W: 8, NHWC: true}, false,
			[3]float32{norm(255, 0), norm(128, 1), norm(0, 2)},
			[3]float32{norm(PadValue, 0), norm(PadValue, 1), norm(PadValue, 2)}},
		{Output{C: 1, H: 8, W: 8}, true,
			[3]float32{norm(0.299*255+0.587*128, 0)},
			[3]float32{norm(PadValue, 0)}},
	} {
		o := Options{Resize: Letterbox, BGR: c.bgr, Scale: 1.0 / 255, Mean: mean, Std: std, Out: c.out}
		fast, _ := runFast(t, o, src, f)
		ref := make([]byte, o.Out.Bytes())
		if _, err := reference(src, f, o, ref); err != nil {
			t.Fatal(err)
		}
		// 8x4 letterboxed into 8x8: rows 0-1 and 6-7 are padding.
		for name, got := range map[string][]float32{"fast": fast, "reference": decode(ref, o.Out)} {
			for ch := 0; ch < c.out.C; ch++ {
				if v := got[c.out.Index(ch, 4, 3)]; math.Abs(float64(v-c.want[ch])) > 2e-4 {
					t.Errorf("%s %s bgr=%v: channel %d = %v, want %v", name, c.out, c.bgr, ch, v, c.want[ch])
				}
				if v := got[c.out.Index(ch, 0, 3)]; math.Abs(float64(v-c.pad[ch])) > 2e-4 {
					t.Errorf("%s %s bgr=%v: channel %d padding = %v, want %v", name, c.out, c.bgr, ch, v, c.pad[ch])
				}
			}
		}
	}
}

func TestErrors(t *testing.T) {
	out := Output{C: 3, H: 8, W: 8}
	p, err := New(Options{Out: out, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	f := sensors.Format{Width: 8, Height: 8, Pixel: sensors.YUYV}
	src, dst := make([]byte, f.FrameSize()), make([]byte, out.Bytes())
	if _, err := p.Run(src, f, dst); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  []byte
		f    sensors.Format
		dst  []byte
		want error
	}{
		{"short frame", src[:len(src)-1], f, dst, ErrFrame},
		{"short tensor", src, f, dst[:len(dst)-1], ErrTensor},
		{"MJPEG", make([]byte, 1<<12), sensors.Format{Width: 8, Height: 8, Pixel: sensors.MJPEG}, dst, ErrUnsupported},
		{"unknown fourcc", src, sensors.Format{Width: 8, Height: 8, Pixel: 0x34325258}, dst, ErrUnsupported},
		{"zero size", src, sensors.Format{Width: 0, Height: 8, Pixel: sensors.YUYV}, dst, ErrFrame},
		{"stride below line", src, sensors.Format{Width: 8, Height: 8, Pixel: sensors.YUYV, Stride: 15}, dst, ErrFrame},
		{"odd width packed YUYV", make([]byte, 1<<12), sensors.Format{Width: 7, Height: 8, Pixel: sensors.YUYV}, dst, ErrFrame},
		{"odd width packed NV12", make([]byte, 1<<12), sensors.Format{Width: 7, Height: 8, Pixel: sensors.NV12}, dst, ErrFrame},
	} {
		if _, err := p.Run(c.src, c.f, c.dst); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if _, err := reference(c.src, c.f, p.Options(), c.dst); !errors.Is(err, c.want) {
			t.Errorf("reference, %s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := p.Run(make([]byte, 1<<12), sensors.Format{Width: 8, Height: 8, Pixel: sensors.MJPEG}, dst); err == nil || !strings.Contains(err.Error(), "MJPEG must be decoded by the source") {
		t.Errorf("MJPEG message: %v", err)
	}
	// Odd widths are fine with a stride holding the last chroma pair.
	odd := sensors.Format{Width: 7, Height: 8, Pixel: sensors.YUYV, Stride: 16}
	if _, err := p.Run(make([]byte, odd.FrameSize()), odd, dst); err != nil {
		t.Errorf("odd width with stride: %v", err)
	}
	p.Close()
	p.Close()
	if _, err := p.Run(src, f, dst); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	good := Options{Out: Output{C: 3, H: 8, W: 8}}
	for _, c := range []struct {
		name string
		edit func(*Options)
	}{
		{"resize", func(o *Options) { o.Resize = "squash" }},
		{"filter", func(o *Options) { o.Filter = "cubic" }},
		{"matrix", func(o *Options) { o.Matrix = "bt2020" }},
		{"channels", func(o *Options) { o.Out.C = 4 }},
		{"height", func(o *Options) { o.Out.H = 0 }},
		{"threads", func(o *Options) { o.Threads = -1 }},
	} {
		o := good
		c.edit(&o)
		if _, err := New(o); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	p, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.Options()
	if got.Resize != Stretch || got.Filter != Bilinear || got.Matrix != BT601 || got.Threads < 1 || got.Threads > 4 {
		t.Errorf("defaults: %+v", got)
	}
}

func TestNoAllocations(t *testing.T) {
	f := sensors.Format{Width: 640, Height: 480, Pixel: sensors.YUYV}
	src := noise(f, 1)
	for _, o := range []Options{
		{Resize: Letterbox, Out: Output{C: 3, H: 224, W: 224}},
		{Out: Output{C: 1, H: 300, W: 400}},
		{Filter: Area, Out: Output{C: 3, H: 64, W: 64, NHWC: true, Half: true}},
	} {
		for _, threads := range []int{1, 4} {
			o.Threads = threads
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, o.Out.Bytes())
			if _, err := p.Run(src, f, dst); err != nil {
				t.Fatal(err)
			}
			if threads > 1 && len(p.plan.chunks) == 1 {
				t.Fatalf("%s %s: one chunk, the workers are not exercised", o.Filter, o.Out)
			}
			if n := testing.AllocsPerRun(20, func() { p.Run(src, f, dst) }); n != 0 {
				t.Errorf("%s %s threads %d: %v allocations per frame", o.Filter, o.Out, threads, n)
			}
			p.Close()
		}
	}
}
