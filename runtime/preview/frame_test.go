package preview

import (
	"errors"
	"image"
	"math/rand/v2"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// TestRowsMatchTheFrame: for every pixel format, with and without row
// padding (a stride beyond the packed line), the picture's pixel (x, y)
// is the frame's pixel (x·step, y·step) as pixconv converts it (BT.601,
// limited range: Matrix{}), step being the smallest that brings the width
// to at most the picture's.
func TestRowsMatchTheFrame(t *testing.T) {
	const w, h = 200, 120
	rng := rand.New(rand.NewPCG(1, 2))
	rgb := make([]byte, 3*w*h)
	for i := range rgb {
		rgb[i] = byte(rng.IntN(256))
	}
	for _, pf := range []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.GREY, sensors.RGB24, sensors.BGR24} {
		for _, pad := range []int{0, 24} {
			f := sensors.Format{Width: w, Height: h, Pixel: pf}
			if pad > 0 {
				f.Stride = pf.PackedLine(w) + pad
			}
			data := make([]byte, pixconv.RawSize(f))
			if _, err := pixconv.FromRGB24(data, f, rgb, 3*w); err != nil {
				t.Fatal(err)
			}
			ref := make([]byte, 3*w*h)
			if err := pixconv.ToRGB24(ref, f, data); err != nil {
				t.Fatal(err)
			}
			for _, maxW := range []int{w, 100, 64} {
				var r rows
				if err := r.copyFrom(Frame{Format: f, Data: data}, maxW); err != nil {
					t.Fatal(err)
				}
				pw, ph := r.size()
				step := (w + maxW - 1) / maxW
				if pw > maxW || pw != (w+step-1)/step || ph != (h+step-1)/step {
					t.Fatalf("%s at most %d wide: %dx%d", pf, maxW, pw, ph)
				}
				img := image.NewRGBA(image.Rect(0, 0, pw, ph))
				r.toRGBA(img)
				worst := 0
				for y := 0; y < ph; y++ {
					for x := 0; x < pw; x++ {
						got := img.RGBAAt(x, y)
						want := ref[3*(y*step*w+x*step):]
						for c, v := range []uint8{got.R, got.G, got.B} {
							worst = max(worst, abs(int(v)-int(want[c])))
						}
					}
				}
				if worst > 1 {
					t.Errorf("%s stride %d, at most %d wide: a channel differs by %d from pixconv", pf, f.Stride, maxW, worst)
				}
			}
		}
	}
}

// TestRowsRefuse: formats and sizes the preview cannot show are errors,
// not crashes.
func TestRowsRefuse(t *testing.T) {
	for _, c := range []Frame{
		{Format: sensors.Format{Width: 64, Height: 48, Pixel: sensors.MJPEG}, Data: make([]byte, 100)},
		{Format: sensors.Format{Width: 64, Height: 48, Pixel: sensors.YUYV}, Data: make([]byte, 64*2*48-1)},
		{Format: sensors.Format{Width: 64, Height: 48, Pixel: sensors.NV12}, Data: make([]byte, 64*48)},
		{Format: sensors.Format{Width: 0, Height: 48, Pixel: sensors.GREY}},
		{Format: sensors.Format{Width: 64, Height: 48, Pixel: sensors.GREY, Stride: 10}, Data: make([]byte, 64*48)},
	} {
		var r rows
		if err := r.copyFrom(c, 640); !errors.Is(err, ErrFrameFormat) {
			t.Errorf("%v with %d bytes: %v", c.Format, len(c.Data), err)
		}
	}
}

// TestMatrices: each colour matrix maps its own white, black and grey
// where they belong (the pipeline's color_matrix and color_range).
func TestMatrices(t *testing.T) {
	for _, c := range []struct {
		m            Matrix
		black, white uint8
	}{{Matrix{}, 16, 235}, {Matrix{BT709: true}, 16, 235}, {Matrix{FullRange: true}, 0, 255}, {Matrix{BT709: true, FullRange: true}, 0, 255}} {
		k := c.m.coeffs()
		px := make([]byte, 4)
		for _, v := range []struct{ y, want uint8 }{{c.black, 0}, {c.white, 255}} {
			k.rgb(v.y, 128, 128, px)
			if px[0] != v.want || px[1] != v.want || px[2] != v.want {
				t.Errorf("%+v: Y %d gives %v, want %d", c.m, v.y, px[:3], v.want)
			}
		}
	}
}
