package rtsp

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/rtcp"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// TestCaptureClock: without sender reports every frame's capture time is
// its first packet's arrival (ClockArrival); with them, frames after the
// first report are on the camera's clock (ClockSenderReport), increasing,
// and earlier than their arrival by what the camera says its latency is
// (the test server: 20 ms from capture to sending), seen as the median
// difference of TReady − TCapture between the two runs.
func TestCaptureClock(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	var median [2]time.Duration
	for run, sr := range []bool{false, true} {
		fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, NoSenderReports: !sr})
		s, _, err := open(t, Options{URL: fs.URL, Transport: TransportTCP, Decoder: dec}, 6, 170*100*3/2)
		if err != nil {
			t.Fatal(err)
		}
		var last sensors.Frame
		var ages []time.Duration
		for i := 0; i < 60; i++ {
			f, _, err := nextFrame(t, s, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if f.TCapture > f.TReady {
				t.Fatalf("captured %v after it was ready", time.Duration(f.TCapture-f.TReady))
			}
			switch f.Clock {
			case sensors.ClockSenderReport:
				if !sr {
					t.Fatal("a frame on the sender report clock from a camera that sends none")
				}
				if last.Clock == sensors.ClockSenderReport && f.TCapture <= last.TCapture {
					t.Errorf("capture times not increasing: %v", time.Duration(f.TCapture-last.TCapture))
				}
				ages = append(ages, time.Duration(f.TReady-f.TCapture))
			case sensors.ClockArrival:
				if sr && last.Clock == sensors.ClockSenderReport {
					t.Error("back to the arrival clock after a sender report")
				}
				if !sr {
					ages = append(ages, time.Duration(f.TReady-f.TCapture))
				}
			default:
				t.Fatalf("clock %v", f.Clock)
			}
			if last.Slot != nil {
				last.Slot.Release()
			}
			last = f
		}
		last.Slot.Release()
		if len(ages) < 30 {
			t.Fatalf("sender reports %v: only %d of 60 frames on the expected clock", sr, len(ages))
		}
		slices.Sort(ages)
		median[run] = ages[len(ages)/2]
		t.Logf("sender reports %v: %d of 60 frames on the expected clock, ready a median %v after capture", sr, len(ages), median[run])
		s.Close()
		fs.Close()
	}
	if d := median[1] - median[0]; d < 10*time.Millisecond || d > 40*time.Millisecond {
		t.Errorf("the camera's clock puts capture %v earlier than arrival; it says 20 ms", d)
	}
}

// TestClockMapping: the mapping itself, including a timestamp wrap and
// reports that cannot be believed.
func TestClockMapping(t *testing.T) {
	c := clock{rate: 90000}
	if tc, k := c.capture(5, 1e9); tc != 1e9 || k != sensors.ClockArrival {
		t.Errorf("before a report: %d %v", tc, k)
	}
	c.report(0xffffff00, 1, 10e9)
	// 0x100 + 0x100 ticks after the report, across the wrap: 512/90000 s.
	if tc, k := c.capture(0x100, 10.5e9); k != sensors.ClockSenderReport || tc != int64(10e9)+512*1_000_000_000/90000 {
		t.Errorf("after a wrap: %d %v", tc, k)
	}
	if _, k := c.capture(0x100+90000, 10.5e9); k != sensors.ClockArrival {
		t.Error("a capture time 1 s after the arrival believed")
	}
	if tc, k := c.capture(0x100+900, 10.005e9); k != sensors.ClockSenderReport || tc != 10.005e9 {
		t.Errorf("a capture time 5 ms after the arrival: %d %v, want the arrival on the report's clock", tc, k)
	}
	if _, k := c.capture(0xffffff00, 13e9); k != sensors.ClockArrival {
		t.Error("a capture time 3 s before the arrival believed")
	}
}

// TestParametersInBandOnly: an SDP without sprop-parameter-sets: Start
// learns the size from the first key picture's SPS, and the stream plays.
func TestParametersInBandOnly(t *testing.T) {
	dec := cpuDecoder(t)
	for _, c := range []h26x.Codec{h26x.H264, h26x.H265} {
		aus, sums := sample(t, c, dec)
		fs := fileServer(t, rtsptest.FileOptions{Codec: c, AUs: aus, NoParams: true})
		s, _, err := open(t, Options{URL: fs.URL, Decoder: dec}, 4, 170*100*3/2)
		if err != nil {
			t.Fatal(err)
		}
		if f := s.Format(); f.Width != 170 || f.Height != 100 {
			t.Fatalf("%s: Format %v", c, f)
		}
		if !strings.Contains(s.Describe(), "no parameter sets in the SDP") {
			t.Errorf("Describe: %s", s.Describe())
		}
		for range 5 {
			f, _, err := nextFrame(t, s, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := sums[sha256Of(f)]; !ok {
				t.Fatalf("%s: a frame that is not the stream's", c)
			}
			f.Slot.Release()
		}
		s.Close()
	}
}

// TestCredentials: the right password plays; a wrong one or none is
// ErrUnauthorized, and no error says the password; a URL with credentials
// in it is refused before anything connects.
func TestCredentials(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, User: "viewer", Password: "s3cret-pass"})
	s, _, err := open(t, Options{URL: fs.URL, Username: "viewer", Password: "s3cret-pass", Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	if f, _, err := nextFrame(t, s, 10*time.Second); err != nil {
		t.Fatal(err)
	} else {
		f.Slot.Release()
	}
	s.Close()
	for _, pw := range []string{"wrong-pass", ""} {
		user := "viewer"
		if pw == "" {
			user = ""
		}
		_, _, err := open(t, Options{URL: fs.URL, Username: user, Password: pw, Decoder: dec}, 4, 170*100*3/2)
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("password %q: %v, want ErrUnauthorized", pw, err)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong-pass")) {
			t.Errorf("the error says the password: %v", err)
		}
		t.Logf("password %q: %v", pw, err)
	}
	_, err = New(Options{Name: "cam", URL: "rtsp://viewer:s3cret-pass@127.0.0.1:554/cam", Decoder: dec})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a URL with credentials: %v", err)
	}
}

// silentServer accepts TCP connections and reads them, never answering:
// a camera whose RTSP stack hangs.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				b := make([]byte, 4096)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
				}
			}()
			t.Cleanup(func() { c.Close() })
		}
	}()
	return "rtsp://" + l.Addr().String() + "/cam"
}

// TestServerThatNeverAnswers: DESCRIBE to a server that accepts and
// never answers fails within the timeout (ErrDeviceGone) while Start says
// it is pacing (the watchdog must not count it stuck); cancelling the
// context or closing the source ends such a Start at once.
func TestServerThatNeverAnswers(t *testing.T) {
	dec := cpuDecoder(t)
	url := silentServer(t)
	s, err := New(Options{Name: "cam", URL: url, Timeout: time.Second, Decoder: dec})
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(2, 100)
	sawPacing := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !s.Pacing() {
			time.Sleep(5 * time.Millisecond)
		}
		sawPacing <- s.Pacing()
	}()
	t0 := time.Now()
	err = s.Start(context.Background(), pool)
	took := time.Since(t0)
	if !errors.Is(err, sensors.ErrDeviceGone) || took < 900*time.Millisecond || took > 3*time.Second {
		t.Errorf("Start took %v: %v; want ErrDeviceGone after about 1 s", took, err)
	}
	if !<-sawPacing {
		t.Error("not Pacing while Start waited for DESCRIBE's answer")
	}
	if s.Pacing() {
		t.Error("Pacing after Start returned")
	}
	for _, how := range []string{"cancel", "close"} {
		s, _ = New(Options{Name: "cam", URL: url, Timeout: time.Minute, Decoder: dec})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, func() {
			if how == "cancel" {
				cancel()
			} else {
				s.Close()
			}
		})
		t0 = time.Now()
		err = s.Start(ctx, pool)
		cancel()
		if took := time.Since(t0); took > 2*time.Second || err == nil {
			t.Errorf("%s: Start returned after %v: %v", how, took, err)
		}
		if how == "cancel" && !errors.Is(err, context.Canceled) || how == "close" && !errors.Is(err, sensors.ErrClosed) {
			t.Errorf("%s: %v", how, err)
		}
		s.Close()
	}
}

// TestNothingListening: a refused connection is ErrDeviceGone at once (the
// capture loop's backoff retries it).
func TestNothingListening(t *testing.T) {
	dec := cpuDecoder(t)
	url := "rtsp://127.0.0.1:" + itoa(rtsptest.FreePort(t)) + "/cam"
	t0 := time.Now()
	_, _, err := open(t, Options{URL: url, Decoder: dec}, 2, 100)
	if !errors.Is(err, sensors.ErrDeviceGone) || time.Since(t0) > time.Second {
		t.Errorf("%v after %v", err, time.Since(t0))
	}
}

// TestCameraStopsSending: a camera that keeps its session (and RTCP) but
// stops sending video is down within the timeout and a quarter, with
// ErrStalled; gortsplib alone never notices.
func TestCameraStopsSending(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	for _, transport := range []string{TransportTCP, TransportUDP} {
		fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, UDP: true})
		s, _, err := open(t, Options{URL: fs.URL, Transport: transport, Timeout: 1500 * time.Millisecond, Decoder: dec}, 4, 170*100*3/2)
		if err != nil {
			t.Fatal(err)
		}
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		f.Slot.Release()
		fs.Stall(true)
		t0 := time.Now()
		for {
			f, _, err = nextFrame(t, s, 10*time.Second)
			if err != nil {
				break
			}
			f.Slot.Release()
			t0 = time.Now()
		}
		took := time.Since(t0)
		if !errors.Is(err, sensors.ErrDeviceGone) || !errors.Is(err, ErrStalled) || took > 1500*time.Millisecond*5/4+300*time.Millisecond {
			t.Errorf("%s: %v after %v", transport, err, took)
		}
		t.Logf("%s: %v after %v", transport, err, took.Round(time.Millisecond))
		s.Close()
		fs.Close()
	}
}

// TestServerGoneAndBack: the server exits: Next reports ErrDeviceGone at
// once; no frame comes after that; once a server is back on the address,
// Close and Start play again, and the first frame is a new one (captured
// after the restart, Seq going on).
func TestServerGoneAndBack(t *testing.T) {
	dec := cpuDecoder(t)
	aus, sums := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	addr := strings.TrimSuffix(strings.TrimPrefix(fs.URL, "rtsp://"), "/cam")
	s, pool, err := open(t, Options{URL: fs.URL, Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	var lastSeq uint64
	for range 10 {
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		lastSeq = f.Seq
		f.Slot.Release()
	}
	fs.Close()
	t0 := time.Now()
	var err2 error
	for {
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			err2 = err
			break
		}
		lastSeq = f.Seq
		f.Slot.Release()
	}
	if !errors.Is(err2, sensors.ErrDeviceGone) || time.Since(t0) > 2*time.Second {
		t.Errorf("%v after %v", err2, time.Since(t0))
	}
	s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	restart := sensors.Now()
	fs2 := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, Address: addr})
	defer fs2.Close()
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	f, _, err := nextFrame(t, s, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if f.Seq != lastSeq+1 || f.TCapture < restart {
		t.Errorf("first frame after the restart: seq %d (last %d), captured %v before the restart", f.Seq, lastSeq, time.Duration(restart-f.TCapture))
	}
	if _, ok := sums[sha256Of(f)]; !ok {
		t.Error("not one of the stream's pictures")
	}
	f.Slot.Release()
	if st := s.Stats(); st.Sessions != 2 {
		t.Errorf("%d sessions", st.Sessions)
	}
}

// TestGeometryChange: a stream that changes size at a key picture: a
// smaller size is followed (frames carry their format); a larger one than
// the slots hold is sensors.ErrGeometry, after which SlotSize says what a
// slot needs, and a Start with such slots plays the new size.
func TestGeometryChange(t *testing.T) {
	dec := cpuDecoder(t)
	big, _ := sample(t, h26x.H264, dec)
	small, err := h26xtest.ReadAccessUnits("../h26x/testdata/h264_96x64.h264", h26x.H264)
	if err != nil {
		t.Fatal(err)
	}
	// 170x100 then 96x64, in slots for 170x100: followed.
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: append(append([][]byte{}, big[:30]...), small...)})
	s, _, err := open(t, Options{URL: fs.URL, Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int]int{}
	for range 60 {
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if f.BytesUsed != f.Format.FrameSize() {
			t.Fatalf("%v in %d bytes", f.Format, f.BytesUsed)
		}
		sizes[f.Format.Width]++
		f.Slot.Release()
	}
	if sizes[170] == 0 || sizes[96] == 0 {
		t.Errorf("sizes seen %v, want both", sizes)
	}
	s.Close()
	fs.Close()
	// 96x64 then 170x100, in slots for 96x64: ErrGeometry.
	fs = fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: append(append([][]byte{}, small...), big[:30]...)})
	s, _, err = open(t, Options{URL: fs.URL, Decoder: dec}, 4, 96*64*3/2)
	for i := 0; err == nil && i < 200; i++ {
		var f sensors.Frame
		f, _, err = nextFrame(t, s, 10*time.Second)
		if err == nil {
			f.Slot.Release()
		}
	}
	if !errors.Is(err, sensors.ErrGeometry) {
		t.Fatalf("%v, want ErrGeometry", err)
	}
	if s.SlotSize() != 170*100*3/2 {
		t.Errorf("SlotSize %d after %v", s.SlotSize(), err)
	}
	t.Log(err)
	s.Close()
	pool := sensorstest.NewHeapPool(4, s.SlotSize())
	defer pool.Close()
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		f.Slot.Release()
	}
}

// TestUnsupportedStreamRefused: a 4:4:4 stream is sensors.ErrFormat at
// Start, with a reason, and nothing reaches the decoder.
func TestUnsupportedStreamRefused(t *testing.T) {
	dec := cpuDecoder(t)
	aus, err := h26xtest.ReadAccessUnits("../h26x/testdata/h264_444_64x48.h264", h26x.H264)
	if err != nil {
		t.Fatal(err)
	}
	opened := false
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	_, _, err = open(t, Options{URL: fs.URL, Decoder: func(c h26x.Codec, p []byte) (Decoder, error) { opened = true; return dec(c, p) }}, 2, 64*48*3)
	if !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "4:2:0") || opened {
		t.Errorf("%v (decoder opened: %v)", err, opened)
	}
}

// TestNoVideo: an SDP without H.264/H.265 video is ErrNoVideo
// (sensors.ErrFormat); a path the server does not have is ErrNotFound.
func TestNotAStream(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	_, _, err := open(t, Options{URL: strings.TrimSuffix(fs.URL, "cam") + "other", Decoder: dec}, 2, 100)
	if !errors.Is(err, sensors.ErrNotFound) {
		t.Errorf("another path: %v", err)
	}
}

// TestAutoFallsBackToTCP: auto against a server without UDP plays over
// TCP, and later sessions go to TCP straight away.
func TestAutoFallsBackToTCP(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	s, pool, err := open(t, Options{URL: fs.URL, Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := nextFrame(t, s, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f.Slot.Release()
	if st := s.Stats(); st.Transport != TransportTCP || st.Fallbacks != 1 {
		t.Errorf("%+v", st)
	}
	s.Close()
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Transport != TransportTCP || st.Fallbacks != 1 {
		t.Errorf("second session: %+v", st)
	}
}

// TestReceiverReportsOverTCP: over TCP the source sends RTCP receiver
// reports for the camera's stream (gortsplib sends them only over UDP).
func TestReceiverReportsOverTCP(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	s, _, err := open(t, Options{URL: fs.URL, Transport: TransportTCP, Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(receiverReportPeriod + 5*time.Second)
	var rr *rtcp.ReceiverReport
	for rr == nil && time.Now().Before(deadline) {
		if f, _, err := nextFrame(t, s, 10*time.Second); err == nil {
			f.Slot.Release()
		}
		for _, p := range fs.RTCP() {
			if r, ok := p.(*rtcp.ReceiverReport); ok && len(r.Reports) == 1 {
				rr = r
			}
		}
	}
	if rr == nil {
		t.Fatal("no receiver report reached the server")
	}
	if rr.Reports[0].SSRC == 0 || rr.Reports[0].LastSequenceNumber == 0 {
		t.Errorf("%+v", rr)
	}
	// The source counts a report once WritePacketRTCP returned, which can
	// be after the server has read it: wait for the count.
	for end := time.Now().Add(10 * time.Second); s.Stats().ReceiverReports == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a receiver report reached the server but none was counted: %+v", s.Stats())
		}
	}
}

// TestSourceContract: sensors/sensorstest's checks with a Next that waits
// for a camera that stopped sending (Pacing), and Close releasing every
// slot.
func TestSourceContract(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	s, pool, err := open(t, Options{URL: fs.URL, Timeout: time.Minute, Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := nextFrame(t, s, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fs.Stall(true)
	time.Sleep(200 * time.Millisecond)
	for {
		// Take what was in flight, so the next Next waits for the camera.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		g, err := s.Next(ctx)
		cancel()
		if err != nil {
			break
		}
		g.Slot.Release()
	}
	sensorstest.CheckSource(t, sensorstest.SourceCase{Source: s, Pool: pool, Release: f.Slot.Release, Pacing: true})
}

// TestOneDeadCameraDoesNotSlowAnother: while one source hangs in Start on
// a server that never answers, another plays at its full 30 frames a
// second.
func TestOneDeadCameraDoesNotSlowAnother(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	good, _, err := open(t, Options{Name: "good", URL: fs.URL, Decoder: dec}, 4, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := New(Options{Name: "dead", URL: silentServer(t), Timeout: 20 * time.Second, Decoder: dec})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dead.Start(context.Background(), sensorstest.NewHeapPool(2, 100)) }()
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	n := 0
	for time.Since(t0) < 2*time.Second {
		f, _, err := nextFrame(t, good, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		n++
		f.Slot.Release()
	}
	select {
	case err := <-done:
		t.Fatalf("the dead camera's Start returned: %v", err)
	default:
	}
	if n < 50 {
		t.Errorf("%d frames in 2 s from the good camera while the other hung", n)
	}
	dead.Close()
	<-done
}

// TestProbe: Probe says codec, size and transport, with the SDP's
// parameter sets or without them, and leaves the source closed (no
// decoder needed); it refuses a started source.
func TestProbe(t *testing.T) {
	dec := cpuDecoder(t)
	for _, c := range []h26x.Codec{h26x.H264, h26x.H265} {
		for _, noParams := range []bool{false, true} {
			aus, _ := sample(t, c, dec)
			fs := fileServer(t, rtsptest.FileOptions{Codec: c, AUs: aus, NoParams: noParams})
			s, err := New(Options{Name: "cam", URL: fs.URL, Transport: TransportTCP})
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Probe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.Codec != c || info.Format.Width != 170 || info.Format.Height != 100 || info.Transport != TransportTCP || info.InBand != noParams || s.SlotSize() != 170*100*3/2 {
				t.Errorf("%s, no params %v: %+v, slot %d", c, noParams, info, s.SlotSize())
			}
			t.Log(info)
			if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrClosed) {
				t.Errorf("Next after Probe: %v", err)
			}
			fs.Close()
		}
	}
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	s, _, err := open(t, Options{URL: fs.URL, Decoder: dec}, 2, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Probe(context.Background()); err == nil {
		t.Error("Probe of a started source")
	}
}
