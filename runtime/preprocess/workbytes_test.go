package preprocess

import (
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// TestWorkBytesBoundsWhatIsAllocated: the memory check's estimate of the
// CPU path's tables and buffers (WorkBytes) is at least what New and the
// first frame (which builds the plan) allocate, and not far above it, for
// frames and inputs small and large, bilinear and area, NHWC float16.
func TestWorkBytesBoundsWhatIsAllocated(t *testing.T) {
	for _, c := range []struct {
		pix            sensors.PixelFormat
		sw, sh, ow, oh int
		filter         string
		half, nhwc     bool
	}{
		{sensors.YUYV, 640, 480, 224, 224, Bilinear, false, false},
		{sensors.YUYV, 1920, 1080, 640, 640, Area, false, false},
		{sensors.NV12, 320, 240, 2048, 2048, Bilinear, true, true},
		{sensors.RGB24, 4096, 3072, 4096, 4096, Area, false, true},
		{sensors.GREY, 64, 48, 8192, 8192, Bilinear, false, false},
	} {
		t.Run(fmt.Sprintf("%dx%d-%dx%d-%s", c.sw, c.sh, c.ow, c.oh, c.filter), func(t *testing.T) {
			out := Output{C: 3, H: c.oh, W: c.ow, Half: c.half, NHWC: c.nhwc}
			f := sensors.Format{Width: c.sw, Height: c.sh, Pixel: c.pix}
			src := make([]byte, f.FrameSize())
			dst := make([]byte, out.Bytes())
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			p, err := New(Options{Filter: c.filter, Threads: 4, Out: out})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Run(src, f, dst); err != nil {
				t.Fatal(err)
			}
			goruntime.ReadMemStats(&after)
			got, est := int64(after.TotalAlloc-before.TotalAlloc), WorkBytes(c.sw, c.sh, c.ow, c.oh, 4)
			t.Logf("allocated %d KiB, estimated %d KiB", got>>10, est>>10)
			if est < got {
				t.Errorf("WorkBytes = %d, but %d bytes were allocated", est, got)
			}
			if est > 4*got+(256<<10) {
				t.Errorf("WorkBytes = %d, over four times the %d bytes allocated", est, got)
			}
		})
	}
}
