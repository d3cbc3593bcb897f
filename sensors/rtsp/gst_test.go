package rtsp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// bars are the YUV values of GStreamer's videotestsrc "smpte" pattern:
// the top two thirds are seven bars of 100 % colour (white, yellow, cyan,
// green, magenta, red, blue), in limited range with BT.601's matrix below
// 720 lines and BT.709's from 720 (GStreamer's default colorimetry).
func bars(height int) [7][3]int {
	kr, kb := 0.299, 0.114
	if height >= 720 {
		kr, kb = 0.2126, 0.0722
	}
	var out [7][3]int
	for i, rgb := range [7][3]float64{{1, 1, 1}, {1, 1, 0}, {0, 1, 1}, {0, 1, 0}, {1, 0, 1}, {1, 0, 0}, {0, 0, 1}} {
		y := kr*rgb[0] + (1-kr-kb)*rgb[1] + kb*rgb[2]
		cb, cr := (rgb[2]-y)/(2*(1-kb)), (rgb[0]-y)/(2*(1-kr))
		out[i] = [3]int{int(16 + 219*y + 0.5), int(128 + 224*cb + 0.5), int(128 + 224*cr + 0.5)}
	}
	return out
}

// checkBars reads a 3×3 grid of points inside each bar of an NV12 frame:
// every luma and chroma sample must be the bar's colour (within the
// encoder's error), which a wrong size, stride or chroma interleave
// would not give.
func checkBars(t testing.TB, f sensors.Frame) {
	t.Helper()
	w, h, line := f.Format.Width, f.Format.Height, f.Format.LineBytes()
	b := f.Data()
	bad := 0
	for i, want := range bars(h) {
		x0, x1 := i*w/7+w/28, (i+1)*w/7-w/28
		for _, x := range []int{x0, (x0 + x1) / 2, x1} {
			for _, y := range []int{h / 12, h / 3, h * 7 / 12} {
				uv := line*h + (y/2)*line + (x/2)*2
				got := [3]int{int(b[y*line+x]), int(b[uv]), int(b[uv+1])}
				for k := range 3 {
					if d := got[k] - want[k]; d < -12 || d > 12 {
						if bad++; bad <= 3 {
							t.Errorf("%v frame %d: bar %d at %d,%d is YUV %v, want %v", f.Format, f.Seq, i, x, y, got, want)
						}
						break
					}
				}
			}
		}
	}
}

// TestGStreamerCodecsAndTransports: GStreamer's RTSP server (the one
// DeepStream uses for RTSP out) with live H.264 and H.265 test patterns,
// over TCP, UDP and auto: the bars come out right in every frame.
func TestGStreamerCodecsAndTransports(t *testing.T) {
	dec := cpuDecoder(t)
	for _, codec := range []string{"h264", "h265"} {
		g := rtsptest.StartGStreamer(t, "--codec", codec)
		for _, tr := range []string{TransportTCP, TransportUDP, TransportAuto} {
			t.Run(codec+"/"+tr, func(t *testing.T) {
				s, _, err := open(t, Options{URL: g.URL, Transport: tr, Decoder: dec}, 4, 640*480*3/2)
				if err != nil {
					t.Fatal(err)
				}
				for range 15 {
					f, _, err := nextFrame(t, s, 20*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					if f.Format.Width != 640 || f.Format.Height != 480 {
						t.Fatalf("%v", f.Format)
					}
					checkBars(t, f)
					f.Slot.Release()
				}
				want := tr
				if tr == TransportAuto {
					want = TransportUDP
				}
				if st := s.Stats(); st.Transport != want {
					t.Errorf("transport %s", st.Transport)
				}
				t.Log(s.Describe())
			})
		}
		g.Stop()
	}
}

// TestGStreamerResize: the server changes its resolution mid-stream
// (640x480 to 1280x720, a new SPS, while the SDP still says 640x480): the
// source follows, and the bars are right at both sizes.
func TestGStreamerResize(t *testing.T) {
	dec := cpuDecoder(t)
	g := rtsptest.StartGStreamer(t, "--resize-after", "2", "--resize-to", "1280x720", "--gop", "15")
	s, _, err := open(t, Options{URL: g.URL, Transport: TransportTCP, Decoder: dec}, 4, 1280*720*3/2)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for sizes["1280x720"] < 10 && time.Now().Before(deadline) {
		f, _, err := nextFrame(t, s, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		sizes[fmt.Sprintf("%dx%d", f.Format.Width, f.Format.Height)]++
		checkBars(t, f)
		f.Slot.Release()
	}
	if sizes["640x480"] == 0 || sizes["1280x720"] < 10 || len(sizes) != 2 {
		t.Errorf("sizes %v", sizes)
	}
	if f := s.Format(); f.Width != 1280 {
		t.Errorf("Format %v after the change", f)
	}
}

// TestGStreamerStall: GStreamer stops sending video (a valve) but keeps
// the session and its RTCP: the source is down within the timeout (and a
// quarter). GStreamer's reports come every few seconds, so with a short
// timeout gortsplib's own may fire first; TestCameraStopsSending, whose
// server reports twice a second, shows that the source's watchdog alone
// catches it.
func TestGStreamerStall(t *testing.T) {
	dec := cpuDecoder(t)
	g := rtsptest.StartGStreamer(t, "--stall-after", "2")
	s, _, err := open(t, Options{URL: g.URL, Timeout: 2 * time.Second, Decoder: dec}, 4, 640*480*3/2)
	if err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	for {
		f, _, err := nextFrame(t, s, 20*time.Second)
		if err != nil {
			if !errors.Is(err, sensors.ErrDeviceGone) {
				t.Fatalf("%v, want ErrDeviceGone", err)
			}
			if took := time.Since(last); took > 2*time.Second*5/4+500*time.Millisecond {
				t.Errorf("stall noticed %v after the last frame", took)
			}
			t.Log(err)
			break
		}
		f.Slot.Release()
		last = time.Now()
	}
	if s.Stats().SenderReports == 0 {
		t.Error("GStreamer sent no sender report (the stall would then be gortsplib's timeout)")
	}
}

// TestGStreamerCredentials: GStreamer's basic authentication: the right
// password plays, a wrong one is ErrUnauthorized, and no error says it.
func TestGStreamerCredentials(t *testing.T) {
	dec := cpuDecoder(t)
	g := rtsptest.StartGStreamer(t, "--user", "cam", "--password", "hunter2-secret")
	_, _, err := open(t, Options{URL: g.URL, Username: "cam", Password: "wrong-secret", Decoder: dec}, 4, 640*480*3/2)
	if !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), "secret") {
		t.Errorf("wrong password: %v", err)
	}
	s, _, err := open(t, Options{URL: g.URL, Username: "cam", Password: "hunter2-secret", Decoder: dec}, 4, 640*480*3/2)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := nextFrame(t, s, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkBars(t, f)
	f.Slot.Release()
}

// TestGStreamerSilent: rtsp_server.py --mode silent accepts and never
// answers: Start fails within the timeout.
func TestGStreamerSilent(t *testing.T) {
	dec := cpuDecoder(t)
	g := rtsptest.StartGStreamer(t, "--mode", "silent")
	t0 := time.Now()
	_, _, err := open(t, Options{URL: g.URL, Timeout: time.Second, Decoder: dec}, 2, 100)
	if !errors.Is(err, sensors.ErrDeviceGone) || time.Since(t0) > 3*time.Second {
		t.Errorf("%v after %v", err, time.Since(t0))
	}
}

// TestGStreamerRestarts: the server is killed and comes back three times:
// each time the source goes down at once, comes back under the capture
// loop's backoff within its 2 s cap and a GOP (plus the server's own
// start), and no frame from before a restart is served after it.
func TestGStreamerRestarts(t *testing.T) {
	dec := cpuDecoder(t)
	g := rtsptest.StartGStreamer(t, "--gop", "15")
	s, err := New(Options{Name: "cam", URL: g.URL, Timeout: 2 * time.Second, Decoder: dec})
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(6, 640*480*3/2)
	ctx, cancel := context.WithCancel(context.Background())
	frames := make(chan sensors.Frame)
	done := make(chan struct{})
	go func() {
		rtsptest.Supervise(ctx, s, pool, func(f sensors.Frame) {
			select {
			case frames <- f:
			case <-ctx.Done():
				f.Slot.Release()
			}
		})
		close(done)
	}()
	defer func() { cancel(); <-done; pool.Close() }()
	take := func(within time.Duration) sensors.Frame {
		t.Helper()
		select {
		case f := <-frames:
			return f
		case <-time.After(within):
			t.Fatalf("no frame within %v", within)
		}
		return sensors.Frame{}
	}
	f := take(30 * time.Second)
	f.Slot.Release()
	for round := range 3 {
		g.Stop()
		down := sensors.Now()
		// Frames already delivered may still be in flight; none may be
		// captured after the server died.
		drain := time.After(500 * time.Millisecond)
	drained:
		for {
			select {
			case f := <-frames:
				if f.TCapture > down {
					t.Fatalf("round %d: a frame captured after the server died", round)
				}
				f.Slot.Release()
			case <-drain:
				break drained
			}
		}
		time.Sleep(3 * time.Second) // the camera reboots
		g.Restart()
		back := sensors.Now()
		f := take(30 * time.Second)
		took := time.Duration(sensors.Now() - back)
		if f.TCapture < back {
			t.Errorf("round %d: the first frame after the restart was captured %v before it", round, time.Duration(back-f.TCapture))
		}
		checkBars(t, f)
		f.Slot.Release()
		t.Logf("round %d: first frame %v after the server was back", round, took.Round(time.Millisecond))
		if took > 2*time.Second+500*time.Millisecond+2*time.Second {
			t.Errorf("round %d: %v to recover, want the 2 s backoff cap + a 0.5 s GOP (+2 s slack)", round, took)
		}
	}
	if st := s.Stats(); st.Sessions < 4 {
		t.Errorf("%d sessions", st.Sessions)
	}
}
