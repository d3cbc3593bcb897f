package preprocess

import (
	"math"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// TestReferenceMatchesLegacy: on the options the old implementation had
// (BT.601 limited, bilinear, planar float32), the reference computes what
// it computed, on noisy frames of every format.
func TestReferenceMatchesLegacy(t *testing.T) {
	for _, pf := range []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.GREY, sensors.RGB24, sensors.BGR24} {
		f := sensors.Format{Width: 642, Height: 481, Pixel: pf, Stride: pf.PackedLine(642) + 6}
		src := noise(f, 3)
		for _, o := range []Options{
			{Out: Output{C: 3, H: 224, W: 224}},
			{Resize: Letterbox, Scale: 1, Out: Output{C: 3, H: 100, W: 120}},
			{BGR: true, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.25, 0.25, 0.25}, Out: Output{C: 3, H: 64, W: 48}},
			{Out: Output{C: 1, H: 300, W: 300}},
		} {
			old := make([]float32, o.Out.C*o.Out.H*o.Out.W)
			trOld, err := New(o).Run(src, f, old, o.Out.C, o.Out.H, o.Out.W)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, o.Out.Bytes())
			tr, err := reference(src, f, o, dst)
			if err != nil {
				t.Fatal(err)
			}
			if tr != trOld {
				t.Errorf("%s %s: transform %+v, old %+v", f, o.Out, tr, trOld)
			}
			for i, v := range old {
				if got := refGet(dst, o.Out, i); math.Abs(float64(got-v)) > 1e-4*max(1, math.Abs(float64(v))) {
					t.Fatalf("%s %s: element %d = %v, old %v", f, o.Out, i, got, v)
				}
			}
		}
	}
}
