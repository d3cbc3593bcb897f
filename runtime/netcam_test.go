package runtime

import (
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// TestSteadyStateNetworkCameraFrameAllocatesNothing: a network camera's
// frame (NV12, as the decoders write it, its capture time from the
// camera's sender reports) through preprocessing, the engine,
// post-processing and the socket sink, whose record then carries
// t_capture_clock, allocates nothing once running. The source's own path,
// from gortsplib's *rtp.Packet to the frame in its slot, is
// sensors/rtsp's TestSteadyStateAllocatesNothing.
func TestSteadyStateNetworkCameraFrameAllocatesNothing(t *testing.T) {
	p, _, f, done := benchPipeline(t, newNopEngine(t))
	defer done()
	f.Format = sensors.Format{Width: 640, Height: 480, Pixel: sensors.NV12}
	f.BytesUsed = f.Format.FrameSize()
	for _, clk := range []sensors.CaptureClock{sensors.ClockSenderReport, sensors.ClockArrival} {
		f.Clock = clk
		runFrames(t, p, f, 300, nil)
		if p.rec.CaptureClock != clk.String() {
			t.Fatalf("record's capture clock %q, want %q", p.rec.CaptureClock, clk)
		}
		if allocs := steadyAllocs(t, 200, func() { runFrames(t, p, f, 1, nil) }); allocs != 0 {
			t.Fatalf("%v heap allocations per network camera frame (clock %s)", allocs, clk)
		}
	}
}
