//go:build hil && (amd64 || arm64)

package v4l2

// Hardware-in-the-loop tests against a real camera. Run on the target:
//
//	EDGED_HIL_CAMERA=/dev/v4l/by-id/usb-...-video-index0 \
//	  go test -tags hil -run HIL -v ./sensors/v4l2
//
// Optional: EDGED_HIL_FORMAT (YUYV), EDGED_HIL_SIZE (640x480), EDGED_HIL_FPS
// (30), EDGED_HIL_UNPLUG=1 for the interactive unplug/replug test;
// EDGED_HIL_FORMAT=MJPEG runs TestHILMJPEG (decoder, scale, corrupt frames).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

func hilOptions(t *testing.T) Options {
	t.Helper()
	dev := os.Getenv("EDGED_HIL_CAMERA")
	if dev == "" {
		t.Skip("EDGED_HIL_CAMERA not set")
	}
	o := Options{Name: "hil", Device: dev, Width: 640, Height: 480, Pixel: sensors.YUYV, FPS: 30}
	if s := os.Getenv("EDGED_HIL_FORMAT"); s != "" {
		p, err := sensors.ParsePixelFormat(s)
		if err != nil {
			t.Fatal(err)
		}
		o.Pixel = p
	}
	if s := os.Getenv("EDGED_HIL_SIZE"); s != "" {
		if _, err := fmt.Sscanf(s, "%dx%d", &o.Width, &o.Height); err != nil {
			t.Fatalf("EDGED_HIL_SIZE=%q: %v", s, err)
		}
	}
	if s := os.Getenv("EDGED_HIL_FPS"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		o.FPS = f
	}
	return o
}

func hilPool(t *testing.T, o Options) *sensorstest.Pool {
	f := sensors.Format{Width: o.Width, Height: o.Height, Pixel: o.Pixel}
	// Generous: drivers may pad lines; page-aligned mmap memory.
	p, err := sensorstest.NewMmapPool(o.withDefaults().Buffers+4, f.FrameSize()*2+4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestHILProbe(t *testing.T) {
	o := hilOptions(t)
	info, err := Probe(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s (%s, %s): %s", info.Node, info.Card, info.Driver, info.BusInfo, info.Formats)
}

func capture(t *testing.T, o Options, n int) (*Source, []sensors.Frame) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pool := hilPool(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var frames []sensors.Frame
	for len(frames) < n {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v (stats %+v)", len(frames), err, s.Stats())
		}
		frames = append(frames, sensors.Frame{Seq: f.Seq, TCapture: f.TCapture, BytesUsed: f.BytesUsed, Flags: f.Flags})
		f.Slot.Release()
	}
	return s, frames
}

func TestHILCapture(t *testing.T) {
	o := hilOptions(t)
	const n = 150
	s, frames := capture(t, o, n)
	st := s.Stats()
	now := sensors.Now()
	for i := 1; i < len(frames); i++ {
		if frames[i].Seq <= frames[i-1].Seq || frames[i].TCapture <= frames[i-1].TCapture {
			t.Fatalf("frame %d: seq/timestamp not increasing: %+v after %+v", i, frames[i], frames[i-1])
		}
	}
	if age := time.Duration(now - frames[len(frames)-1].TCapture); age < 0 || age > 2*time.Second {
		t.Fatalf("last frame timestamp is %v old: not CLOCK_MONOTONIC?", age)
	}
	span := time.Duration(frames[n-1].TCapture - frames[0].TCapture)
	got := float64(n-1) / span.Seconds()
	gaps := frames[n-1].Seq - frames[0].Seq - uint64(n-1)
	t.Logf("%s %v, mode %s (%s): %.2f fps achieved, %.2f negotiated, %g requested; %d driver drops; stats %+v",
		st.Device, s.Format(), st.Mode, st.ModeReason, got, s.Format().FPS, o.FPS, gaps, st)
	if want := s.Format().FPS; want > 0 && got < 0.8*want {
		t.Errorf("achieved %.2f fps, less than 80%% of the negotiated %.2f (low light makes UVC cameras halve their rate)", got, want)
	}
}

func TestHILCaptureUserptr(t *testing.T) {
	o := hilOptions(t)
	if o.Pixel == sensors.MJPEG {
		t.Skip("MJPEG always uses MMAP")
	}
	o.Memory = MemoryUserptr
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pool := hilPool(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx, pool); err != nil {
		if errors.Is(err, sensors.ErrFormat) {
			t.Skipf("this driver cannot stream USERPTR (the daemon falls back to MMAP): %v", err)
		}
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 60; i++ {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Flags&sensors.FlagCopied != 0 {
			t.Fatal("USERPTR frame marked as copied")
		}
		f.Slot.Release()
	}
	t.Logf("USERPTR ok: %+v", s.Stats())
}

func TestHILUnplugReplug(t *testing.T) {
	o := hilOptions(t)
	if os.Getenv("EDGED_HIL_UNPLUG") == "" {
		t.Skip("set EDGED_HIL_UNPLUG=1 and follow the instructions to unplug and replug the camera")
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pool := hilPool(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.Start(ctx, pool); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Log(">>> UNPLUG the camera now (or: echo 0 > /sys/bus/usb/devices/<port>/authorized)")
	fmt.Fprintln(os.Stderr, ">>> UNPLUG the camera now")
	var last int64
	for {
		f, err := s.Next(ctx)
		if err != nil {
			if !errors.Is(err, sensors.ErrDeviceGone) {
				t.Fatalf("want ErrDeviceGone, got %v", err)
			}
			t.Logf("unplug detected %v after the last frame: %v", time.Duration(sensors.Now()-last), err)
			break
		}
		last = f.TCapture
		f.Slot.Release()
	}
	if err := s.Close(); err != nil {
		t.Logf("close after unplug: %v", err)
	}
	if pool.Leased() != 0 {
		t.Fatalf("%d slots leaked across the unplug", pool.Leased())
	}
	fmt.Fprintln(os.Stderr, ">>> REPLUG the camera now")
	gone := time.Now()
	for {
		err := s.Start(ctx, pool)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("camera not back: %v", err)
		}
		time.Sleep(250 * time.Millisecond) // the daemon's supervisor backs off the same way
	}
	t.Logf("reopened %v after the unplug was handled", time.Since(gone))
	for i := 0; i < 30; i++ {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f.Slot.Release()
	}
	t.Logf("streaming again: %+v", s.Stats())
}

// TestHILMJPEG (EDGED_HIL_FORMAT=MJPEG): a real UVC camera's MJPEG frames
// decode at the scale a 224x224 input needs, with fewer than 1 % dropped as
// corrupt; it logs the decoder, the scale and the fill time per frame
// (driver timestamp to decoded slot, transfer included).
func TestHILMJPEG(t *testing.T) {
	o := hilOptions(t)
	if o.Pixel != sensors.MJPEG {
		t.Skip("EDGED_HIL_FORMAT is not MJPEG")
	}
	// EDGED_HIL_JPEG=nvjpeg decodes on the GPU (Jetson Orin's JPEG
	// engines) into host memory, as the daemon does with managed slots
	// on a concurrentManagedAccess = 0 device.
	if os.Getenv("EDGED_HIL_JPEG") == "nvjpeg" {
		o.JPEG = jpeg.Options{Backend: jpeg.NVJPEG, GPU: &jpeg.GPU{}}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", s.SetDecodeTarget(224, 224, "stretch"))
	pool := hilPool(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Start(ctx, pool); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 300
	var fill time.Duration
	var format sensors.Format
	for i := 0; i < n; i++ {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v (stats %+v)", i, err, s.Stats())
		}
		fill += time.Duration(f.TReady - f.TCapture)
		format = f.Format
		f.Slot.Release()
	}
	st := s.Stats()
	t.Logf("%v: %d frames, mean fill %v, %d dropped as undecodable; stats %+v", format, n, fill/n, st.Decode, st)
	if st.Decode*100 > n {
		t.Errorf("%d of %d frames did not decode", st.Decode, n+int(st.Decode))
	}
}
