package preprocess

import (
	"errors"
	"math"
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

func at(t []float32, c, h, w, ch, y, x int) float32 { return t[ch*h*w+y*w+x] }

func TestSolidColourEveryFormat(t *testing.T) {
	colour := [3]uint8{200, 30, 30}
	for _, pf := range []sensors.PixelFormat{sensors.RGB24, sensors.BGR24, sensors.YUYV, sensors.UYVY, sensors.NV12} {
		t.Run(pf.String(), func(t *testing.T) {
			f := sensors.Format{Width: 64, Height: 48, Pixel: pf}
			src := render(f, func(int, int) [3]uint8 { return colour })
			dst := make([]float32, 3*16*16)
			p := New(Options{})
			if _, err := p.Run(src, f, dst, 3, 16, 16); err != nil {
				t.Fatal(err)
			}
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

func TestGreyAndSingleChannel(t *testing.T) {
	f := sensors.Format{Width: 8, Height: 8, Pixel: sensors.GREY}
	src := render(f, func(x, y int) [3]uint8 { return [3]uint8{uint8(x * 30), 0, 0} })
	dst := make([]float32, 8*8)
	if _, err := New(Options{Scale: 1}).Run(src, f, dst, 1, 8, 8); err != nil {
		t.Fatal(err)
	}
	for x := 0; x < 8; x++ {
		if got := at(dst, 1, 8, 8, 0, 3, x); math.Abs(float64(got-float32(x*30))) > 0.01 {
			t.Errorf("x=%d: %v, want %d", x, got, x*30)
		}
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
	const H, W = 64, 64
	dst := make([]float32, 3*H*W)
	if _, err := New(Options{}).Run(src, f, dst, 3, H, W); err != nil {
		t.Fatal(err)
	}
	check := func(x, y int, want [3]float32) {
		t.Helper()
		for ch := 0; ch < 3; ch++ {
			if got := at(dst, 3, H, W, ch, y, x); math.Abs(float64(got-want[ch])) > 0.03 {
				t.Errorf("(%d,%d) channel %d = %.3f, want %.3f", x, y, ch, got, want[ch])
			}
		}
	}
	check(5, 5, [3]float32{1, 0, 0})
	check(60, 5, [3]float32{0, 0, 1})
	check(30, 60, [3]float32{0, 1, 0})
}

func TestLetterboxPadsAndMapsBack(t *testing.T) {
	f := sensors.Format{Width: 640, Height: 320, Pixel: sensors.RGB24}
	src := render(f, func(x, y int) [3]uint8 {
		if x >= 320 && x < 384 && y >= 128 && y < 192 {
			return [3]uint8{255, 255, 255}
		}
		return [3]uint8{0, 0, 0}
	})
	const H, W = 64, 64
	dst := make([]float32, 3*H*W)
	p := New(Options{Resize: Letterbox})
	tr, err := p.Run(src, f, dst, 3, H, W)
	if err != nil {
		t.Fatal(err)
	}
	// 640x320 -> 64x32 image area, 16 rows of padding above and below.
	if tr.PadY != 16 || tr.PadX != 0 || tr.ScaleX != 0.1 || tr.ScaleY != 0.1 {
		t.Fatalf("transform %+v", tr)
	}
	pad := float32(PadValue) / 255
	for _, y := range []int{0, 15, 48, 63} {
		if got := at(dst, 3, H, W, 0, y, 10); math.Abs(float64(got-pad)) > 1e-5 {
			t.Errorf("row %d not padded: %v", y, got)
		}
	}
	// The white block is at source (320..384, 128..192): tensor (32..38, 16+12.8..16+19.2).
	if got := at(dst, 3, H, W, 0, 16+16, 35); got < 0.99 {
		t.Errorf("block centre = %v, want white", got)
	}
	sx, sy := tr.ToSource(35.2, 16+16)
	if math.Abs(float64(sx-352)) > 0.01 || math.Abs(float64(sy-160)) > 0.01 {
		t.Errorf("ToSource = %v,%v want 352,160", sx, sy)
	}
}

func TestNormaliseAndBGR(t *testing.T) {
	f := sensors.Format{Width: 4, Height: 4, Pixel: sensors.RGB24}
	src := render(f, func(int, int) [3]uint8 { return [3]uint8{255, 128, 0} })
	dst := make([]float32, 3*4*4)
	opt := Options{BGR: true, Scale: 1.0 / 255, Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}}
	if _, err := New(opt).Run(src, f, dst, 3, 4, 4); err != nil {
		t.Fatal(err)
	}
	want := [3]float32{
		(0 - 0.406) / 0.225,         // B first
		(128.0/255 - 0.456) / 0.224, // G
		(1 - 0.485) / 0.229,         // R last
	}
	for ch := 0; ch < 3; ch++ {
		if got := dst[ch*16]; math.Abs(float64(got-want[ch])) > 1e-4 {
			t.Errorf("channel %d = %v, want %v", ch, got, want[ch])
		}
	}
}

func TestErrors(t *testing.T) {
	p := New(Options{})
	f := sensors.Format{Width: 8, Height: 8, Pixel: sensors.YUYV}
	dst := make([]float32, 3*8*8)
	if _, err := p.Run(make([]byte, 10), f, dst, 3, 8, 8); err == nil {
		t.Error("short frame accepted")
	}
	if _, err := p.Run(make([]byte, 1<<12), sensors.Format{Width: 8, Height: 8, Pixel: sensors.MJPEG}, dst, 3, 8, 8); !errors.Is(err, ErrUnsupported) {
		t.Errorf("MJPEG: %v", err)
	}
	if _, err := p.Run(make([]byte, 128), f, dst, 4, 8, 8); !errors.Is(err, ErrUnsupported) {
		t.Errorf("4 channels: %v", err)
	}
	if _, err := p.Run(make([]byte, 128), f, dst[:10], 3, 8, 8); err == nil {
		t.Error("short tensor accepted")
	}
}

func TestNoAllocations(t *testing.T) {
	f := sensors.Format{Width: 640, Height: 480, Pixel: sensors.YUYV}
	src := make([]byte, f.FrameSize())
	dst := make([]float32, 3*64*64)
	p := New(Options{Resize: Letterbox})
	if _, err := p.Run(src, f, dst, 3, 64, 64); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { p.Run(src, f, dst, 3, 64, 64) }); n != 0 {
		t.Fatalf("%v allocations per frame", n)
	}
}

func benchRun(b *testing.B, f sensors.Format, h, w int) {
	src := make([]byte, f.FrameSize())
	dst := make([]float32, 3*h*w)
	p := New(Options{})
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := p.Run(src, f, dst, 3, h, w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkYUYV640x480To64(b *testing.B) {
	benchRun(b, sensors.Format{Width: 640, Height: 480, Pixel: sensors.YUYV}, 64, 64)
}

func BenchmarkYUYV1080pTo640(b *testing.B) {
	benchRun(b, sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}, 640, 640)
}

func BenchmarkRGB24_640x480To224(b *testing.B) {
	benchRun(b, sensors.Format{Width: 640, Height: 480, Pixel: sensors.RGB24}, 224, 224)
}
