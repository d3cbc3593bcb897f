package mjpeg_test

import (
	"bytes"
	"errors"
	"image"
	stdjpeg "image/jpeg"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/internal/mjpeg"
	"github.com/edged-dev/edged/sensors/jpeg"
)

func frame(t *testing.T, w, h int) []byte {
	var b bytes.Buffer
	if err := stdjpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDecode(t *testing.T) {
	for _, backend := range []string{jpeg.Auto, jpeg.Std} {
		d, err := mjpeg.New(jpeg.Options{Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 320*240*3)
		f, n, err := d.Decode(dst, frame(t, 320, 240), 320, 240, 30)
		if err != nil || n != 320*240*3 || f != (sensors.Format{Width: 320, Height: 240, Pixel: sensors.RGB24, FPS: 30}) {
			t.Fatalf("%s: full: %v, %d, %v", backend, f, n, err)
		}
		d.SetDecodeTarget(100, 50, jpeg.Letterbox) // samples 67x50: 1/4 gives 80x60, 1/8 40x30
		f, n, err = d.Decode(dst, frame(t, 320, 240), 320, 240, 30)
		if err != nil || n != 80*60*3 || f != (sensors.Format{Width: 80, Height: 60, Pixel: sensors.RGB24, FPS: 30, Downscale: 4}) {
			t.Fatalf("%s: scaled: %v, %d, %v", backend, f, n, err)
		}
		// A frame of another size than the camera's is corrupt, not a
		// differently sized image.
		if _, _, err := d.Decode(dst, frame(t, 160, 120), 320, 240, 30); !errors.Is(err, jpeg.ErrCorrupt) {
			t.Errorf("%s: wrong size: %v", backend, err)
		}
		// Close, then decode again (a source's Close and Start).
		d.Close()
		if _, _, err := d.Decode(dst, frame(t, 320, 240), 320, 240, 30); err != nil {
			t.Errorf("%s: after Close: %v", backend, err)
		}
		d.Close()
	}
}
