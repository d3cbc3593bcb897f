package pixconv

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

func TestKnownYCbCr(t *testing.T) {
	for _, c := range []struct {
		r, g, b    uint8
		y, cb, cr  uint8
		name       string
		roundTrips bool
	}{
		{255, 255, 255, 235, 128, 128, "white", true},
		{0, 0, 0, 16, 128, 128, "black", true},
		{255, 0, 0, 82, 90, 240, "red", false},
		{0, 255, 0, 144, 54, 34, "green", false},
		{0, 0, 255, 41, 240, 110, "blue", false},
	} {
		y, cb, cr := YCbCr(c.r, c.g, c.b)
		if y != c.y || cb != c.cb || cr != c.cr {
			t.Errorf("%s: YCbCr = %d,%d,%d, want %d,%d,%d (BT.601 limited range)", c.name, y, cb, cr, c.y, c.cb, c.cr)
		}
		r, g, b := RGB(y, cb, cr)
		if c.roundTrips && (r != c.r || g != c.g || b != c.b) {
			t.Errorf("%s: back to %d,%d,%d", c.name, r, g, b)
		}
	}
	if l := Luma(255, 255, 255); l != 255 {
		t.Errorf("Luma(white) = %d, want 255 (full range)", l)
	}
	if l := Luma(255, 0, 0); l != 77 {
		t.Errorf("Luma(red) = %d, want 77", l)
	}
}

func TestRoundTripError(t *testing.T) {
	worst := 0
	for r := 0; r < 256; r += 5 {
		for g := 0; g < 256; g += 5 {
			for b := 0; b < 256; b += 5 {
				y, cb, cr := YCbCr(uint8(r), uint8(g), uint8(b))
				R, G, B := RGB(y, cb, cr)
				worst = max(worst, abs(int(R)-r), abs(int(G)-g), abs(int(B)-b))
			}
		}
	}
	if worst > 3 {
		t.Fatalf("round trip error %d, documented bound 3", worst)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// A 2×2 image: red, blue on both rows.
var rb = []byte{255, 0, 0, 0, 0, 255, 255, 0, 0, 0, 0, 255}

func TestLayouts(t *testing.T) {
	yr, cbr, crr := YCbCr(255, 0, 0)
	yb, cbb, crb := YCbCr(0, 0, 255)
	cb, cr := avg2(cbr, cbb), avg2(crr, crb)
	for _, c := range []struct {
		pix  sensors.PixelFormat
		want []byte
	}{
		{sensors.RGB24, rb},
		{sensors.BGR24, []byte{0, 0, 255, 255, 0, 0, 0, 0, 255, 255, 0, 0}},
		{sensors.GREY, []byte{77, 29, 77, 29}},
		{sensors.YUYV, []byte{yr, cb, yb, cr, yr, cb, yb, cr}},
		{sensors.UYVY, []byte{cb, yr, cr, yb, cb, yr, cr, yb}},
		{sensors.NV12, []byte{yr, yb, yr, yb, cb, cr}},
	} {
		f := sensors.Format{Width: 2, Height: 2, Pixel: c.pix}
		dst := make([]byte, 64)
		n, err := FromRGB24(dst, f, rb, 6)
		if err != nil {
			t.Fatalf("%s: %v", c.pix, err)
		}
		if !bytes.Equal(dst[:n], c.want) {
			t.Errorf("%s: % x, want % x", c.pix, dst[:n], c.want)
		}
	}
}

func TestStrideRespected(t *testing.T) {
	for _, pix := range []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.GREY, sensors.RGB24, sensors.BGR24} {
		w, h := 6, 4
		rgb := make([]byte, w*h*3)
		for i := range rgb {
			rgb[i] = uint8(rand.IntN(256))
		}
		packed := sensors.Format{Width: w, Height: h, Pixel: pix}
		strided := packed
		strided.Stride = pix.PackedLine(w) + 10
		a := make([]byte, RawSize(packed))
		b := make([]byte, RawSize(strided))
		for i := range b {
			b[i] = 0xEE
		}
		if _, err := FromRGB24(a, packed, rgb, 3*w); err != nil {
			t.Fatal(err)
		}
		if _, err := FromRGB24(b, strided, rgb, 3*w); err != nil {
			t.Fatal(err)
		}
		ra, rbb := make([]byte, w*h*3), make([]byte, w*h*3)
		if err := ToRGB24(ra, packed, a); err != nil {
			t.Fatal(err)
		}
		if err := ToRGB24(rbb, strided, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ra, rbb) {
			t.Errorf("%s: strided frame decodes differently from packed", pix)
		}
		// Padding bytes stay untouched.
		ls := strided.Stride
		if b[ls-1] != 0xEE {
			t.Errorf("%s: padding overwritten", pix)
		}
	}
}

func TestUniformRoundTrip(t *testing.T) {
	// Uniform colours survive every format within the documented bound.
	for _, pix := range []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.RGB24, sensors.BGR24} {
		for _, c := range [][3]uint8{{200, 30, 30}, {30, 170, 40}, {90, 90, 90}, {255, 255, 255}} {
			w, h := 8, 4
			rgb := bytes.Repeat(c[:], w*h)
			f := sensors.Format{Width: w, Height: h, Pixel: pix}
			enc := make([]byte, RawSize(f))
			if _, err := FromRGB24(enc, f, rgb, 3*w); err != nil {
				t.Fatal(err)
			}
			out := make([]byte, len(rgb))
			if err := ToRGB24(out, f, enc); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if abs(int(out[i])-int(rgb[i])) > 3 {
					t.Fatalf("%s %v: byte %d is %d, want %d±3", pix, c, i, out[i], rgb[i])
				}
			}
		}
	}
}

func TestMJPEGDecode(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 32, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 32; x++ {
			img.Set(x, y, color.RGBA{30, 60, 200, 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 32*16*3)
	f := sensors.Format{Width: 32, Height: 16, Pixel: sensors.MJPEG}
	if err := ToRGB24(out, f, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if abs(int(out[0])-30) > 6 || abs(int(out[1])-60) > 6 || abs(int(out[2])-200) > 6 {
		t.Fatalf("decoded %v, want about 30,60,200", out[:3])
	}
	f.Width = 16
	if err := ToRGB24(out, f, b.Bytes()); !errors.Is(err, sensors.ErrFormat) {
		t.Fatalf("size mismatch: %v, want ErrFormat", err)
	}
	if err := ToRGB24(out, sensors.Format{Width: 32, Height: 16, Pixel: sensors.MJPEG}, b.Bytes()[:50]); err == nil {
		t.Fatal("truncated JPEG decoded without error")
	}
}

func TestErrors(t *testing.T) {
	dst := make([]byte, 10)
	if _, err := FromRGB24(dst, sensors.Format{Width: 4, Height: 4, Pixel: sensors.RGB24}, make([]byte, 48), 12); !errors.Is(err, ErrShort) {
		t.Errorf("short dst: %v", err)
	}
	if _, err := FromRGB24(make([]byte, 100), sensors.Format{Width: 3, Height: 2, Pixel: sensors.YUYV}, make([]byte, 18), 9); !errors.Is(err, sensors.ErrFormat) {
		t.Errorf("odd YUYV width: %v", err)
	}
	if err := ToRGB24(make([]byte, 48), sensors.Format{Width: 4, Height: 4, Pixel: sensors.NV12}, make([]byte, 20)); !errors.Is(err, ErrShort) {
		t.Errorf("short NV12 source: %v", err)
	}
}

// FuzzToRGB24 feeds arbitrary bytes and formats to the decoder: it must
// return an error or succeed, never panic.
func FuzzToRGB24(f *testing.F) {
	var b bytes.Buffer
	_ = jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8)), nil)
	f.Add(uint8(6), uint8(8), uint8(8), 0, b.Bytes())
	f.Add(uint8(0), uint8(2), uint8(2), 0, make([]byte, 8))
	f.Add(uint8(2), uint8(4), uint8(2), 6, make([]byte, 12))
	f.Fuzz(func(t *testing.T, pi, w, h uint8, stride int, data []byte) {
		pixs := sensors.PixelFormats()
		fm := sensors.Format{Width: int(w % 64), Height: int(h % 64), Pixel: pixs[int(pi)%len(pixs)], Stride: stride % 512}
		if fm.Stride < 0 {
			fm.Stride = -fm.Stride
		}
		dst := make([]byte, 3*64*64)
		_ = ToRGB24(dst, fm, data)
	})
}
