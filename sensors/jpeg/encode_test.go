package jpeg_test

import (
	"bytes"
	"image"
	stdjpeg "image/jpeg"
	"os"
	"testing"

	"github.com/edged-dev/edged/sensors/jpeg"
)

func turboEncoder(t testing.TB) *jpeg.Encoder {
	e, err := jpeg.NewEncoder(jpeg.EncoderOptions{Backend: jpeg.TurboJPEG})
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_TURBOJPEG") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func stdEncoder(t testing.TB) *jpeg.Encoder {
	e, err := jpeg.NewEncoder(jpeg.EncoderOptions{Backend: jpeg.Std})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// rgbOf is img's pixels as RGB24, for diff.
func rgbOf(img image.Image) []byte {
	b := img.Bounds()
	out := make([]byte, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			out = append(out, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return out
}

// TestEncoderRoundTrip: both encoders write a JPEG that image/jpeg
// decodes to the image's size and close to its pixels (quality 80,
// 4:2:0: a mean absolute difference of a few levels; the sharp edges of
// the scene cost most of it), appended after what dst held; a sub-image
// (its own origin and the parent's stride) encodes as itself.
func TestEncoderRoundTrip(t *testing.T) {
	full := scene(700, 400)
	sub := full.SubImage(image.Rect(30, 20, 670, 380)).(*image.RGBA)
	for name, mk := range map[string]func(testing.TB) *jpeg.Encoder{"turbo": turboEncoder, "std": stdEncoder} {
		t.Run(name, func(t *testing.T) {
			e := mk(t)
			for _, img := range []*image.RGBA{full, sub} {
				prefix := []byte("prefix")
				out, err := e.Encode(append([]byte(nil), prefix...), img)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(out, prefix) {
					t.Fatalf("the bytes before the JPEG were not kept")
				}
				dec, err := stdjpeg.Decode(bytes.NewReader(out[len(prefix):]))
				if err != nil {
					t.Fatalf("image/jpeg cannot decode %s's output: %v", e.Backend().Name, err)
				}
				if dec.Bounds().Dx() != img.Rect.Dx() || dec.Bounds().Dy() != img.Rect.Dy() {
					t.Fatalf("decoded %v, want %dx%d", dec.Bounds(), img.Rect.Dx(), img.Rect.Dy())
				}
				m, mean := diff(rgbOf(dec), rgbOf(img))
				t.Logf("%s %v: %d bytes, max diff %d, mean %.2f", e.Backend().Name, img.Rect, len(out)-len(prefix), m, mean)
				if mean > 4 {
					t.Errorf("mean absolute difference %.2f, want at most 4", mean)
				}
			}
		})
	}
}

// TestEncoderTurboAllocatesNothing: once dst has room, libjpeg-turbo's
// encoder allocates nothing in Go.
func TestEncoderTurboAllocatesNothing(t *testing.T) {
	e := turboEncoder(t)
	img := scene(640, 360)
	buf, err := e.Encode(nil, img)
	if err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, 0, 4*len(buf)+1<<20)
	if a := testing.AllocsPerRun(50, func() {
		if _, err := e.Encode(buf[:0], img); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations per image", a)
	}
}

// TestEncoderChoice: Auto takes libjpeg-turbo where it loads, EDGED_JPEG=go
// forces image/jpeg (with the reason said), a bad quality and a closed
// encoder are errors.
func TestEncoderChoice(t *testing.T) {
	e, err := jpeg.NewEncoder(jpeg.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("auto: %s", e.Backend())
	if _, err := jpeg.NewEncoder(jpeg.EncoderOptions{Backend: jpeg.TurboJPEG}); err == nil && e.Backend().Name != jpeg.TurboJPEG {
		t.Errorf("auto chose %s although libjpeg-turbo loads", e.Backend())
	}
	e.Close()
	e.Close()
	if _, err := e.Encode(nil, scene(16, 16)); err == nil {
		t.Error("a closed encoder encoded")
	}
	t.Setenv(jpeg.EnvBackend, "go")
	e, err = jpeg.NewEncoder(jpeg.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if b := e.Backend(); b.Name != jpeg.Std || b.Why != "EDGED_JPEG=go, backend = image/jpeg" {
		t.Errorf("EDGED_JPEG=go: %s", b)
	}
	for _, q := range []int{-1, 101} {
		if _, err := jpeg.NewEncoder(jpeg.EncoderOptions{Quality: q}); err == nil {
			t.Errorf("quality %d accepted", q)
		}
	}
	if _, err := e.Encode(nil, image.NewRGBA(image.Rectangle{})); err == nil {
		t.Error("an empty image encoded")
	}
}

// BenchmarkEncode640x360 encodes a 640x360 frame of scene, the preview's
// default size, at quality 80: libjpeg-turbo against image/jpeg (the
// baseline) in the same run. docs/PERFORMANCE.md ("Live preview") has the
// numbers.
func BenchmarkEncode640x360(b *testing.B) {
	img := scene(640, 360)
	for name, mk := range map[string]func(testing.TB) *jpeg.Encoder{"image-jpeg": stdEncoder, "libjpeg-turbo": turboEncoder} {
		b.Run(name, func(b *testing.B) {
			e := mk(b)
			buf, _ := e.Encode(nil, img)
			b.SetBytes(int64(4 * 640 * 360))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = e.Encode(buf[:0], img); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
