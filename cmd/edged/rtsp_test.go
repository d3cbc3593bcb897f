package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/nvdec"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/sensors/v4l2dec"
)

// The network camera kind through the binary, against GStreamer's RTSP
// server on 127.0.0.1 (rtsptest: skipped without it unless
// EDGED_REQUIRE_GSTREAMER=1; without libavcodec unless
// EDGED_REQUIRE_LIBAVCODEC=1).

// needAVCodec skips (or fails, with EDGED_REQUIRE_LIBAVCODEC=1) without
// libavcodec.
func needAVCodec(t *testing.T) {
	t.Helper()
	if _, _, err := avcodec.Load(""); err != nil {
		if os.Getenv("EDGED_REQUIRE_LIBAVCODEC") == "1" {
			fatalf(t, "%v, and EDGED_REQUIRE_LIBAVCODEC=1", err)
		}
		t.Skipf("%v; EDGED_REQUIRE_LIBAVCODEC=1 makes this a failure", err)
	}
}

// syntheticSource is the embedded default's camera, which rtspConfig
// replaces.
var syntheticSource = regexp.MustCompile(`(?s)kind = "synthetic".*?\nperiod = 30[^\n]*\n`)

// rtspConfig is the embedded default (with metrics) whose camera is the
// network camera at url with the keys in extra ("transport = \"tcp\"").
func rtspConfig(t *testing.T, dir, url string, extra ...string) (cfgPath, sock, metrics string) {
	t.Helper()
	cfgPath, sock, metrics = metricsConfig(t, dir)
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("kind = \"rtsp\"\nurl = %q\n%s\n", url, strings.Join(extra, "\n"))
	out := syntheticSource.ReplaceAllLiteralString(string(text), src)
	if out == string(text) {
		t.Fatal("no synthetic source in the default configuration")
	}
	if err := os.WriteFile(cfgPath, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, sock, metrics
}

// checkOutput runs edged check on cfg and returns its output and status.
func checkOutput(t *testing.T, lib, cfg string) (string, int) {
	t.Helper()
	cmd := edged("check", "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// TestRTSPCamera: H.264 over TCP and H.265 over UDP, each checked (codec,
// size, transport, the decoder and why) and run: results come, their
// capture clock is named and becomes the camera's once it sends sender
// reports, and the metrics say the transport and the clock.
func TestRTSPCamera(t *testing.T) {
	lib := needORT(t)
	needAVCodec(t)
	for _, tc := range []struct {
		codec, transport, size string
	}{{"h264", "tcp", "640x480"}, {"h265", "udp", "320x240"}} {
		t.Run(tc.codec+"_"+tc.transport, func(t *testing.T) {
			w, h, _ := strings.Cut(tc.size, "x")
			g := rtsptest.StartGStreamer(t, "--codec", tc.codec, "--width", w, "--height", h, "--fps", "15", "--gop", "15")
			cfg, sock, metrics := rtspConfig(t, t.TempDir(), g.URL, fmt.Sprintf("transport = %q", tc.transport))
			out, code := checkOutput(t, lib, cfg)
			want := fmt.Sprintf("%s %s over %s; decoded on the CPU by libavcodec", tc.codec, tc.size, tc.transport)
			if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, `decoder = "auto"`) {
				fatalf(t, "edged check: exit %d, want 0 and %q:\n%s", code, want, out)
			}
			d := start(t, lib, cfg, sock)
			r := readRecords(t, sock)
			res := r.results(t, "demo", 0, 10)
			for _, x := range res {
				if x.CaptureClock != "sender_report" && x.CaptureClock != "arrival" {
					fatalf(t, "t_capture_clock %q, want sender_report or arrival", x.CaptureClock)
				}
			}
			// GStreamer sends its first RTCP sender report within a few
			// seconds: from then on capture times are the camera's.
			r.wait(t, "a result timed by the camera's sender reports", 0, func(x stream.Decoded) bool {
				return x.Type == "result" && x.CaptureClock == "sender_report"
			})
			if v := scrape(t, metrics, `edged_rtsp_frames_total{source="cam0",clock="sender_report"}`); v <= 0 {
				errorf(t, "edged_rtsp_frames_total{clock=sender_report} %v", v)
			}
			if v := scrape(t, metrics, fmt.Sprintf(`edged_rtsp_transport{source="cam0",transport=%q}`, tc.transport)); v != 1 {
				errorf(t, "edged_rtsp_transport for %s: %v, want 1", tc.transport, v)
			}
			if code, _ := d.stop(t); code != 0 {
				fatalf(t, "exit %d", code)
			}
		})
	}
}

// extraCamera appends a network camera at url and a pipeline on it (both
// named name) to the configuration at cfgPath.
func extraCamera(t *testing.T, cfgPath, name, url string, keys ...string) {
	t.Helper()
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "\n[[source]]\nname = %q\nkind = \"rtsp\"\nurl = %q\n%s\n\n[[pipeline]]\nname = %q\nsource = %q\nmodel = \"demo\"\nsinks = [\"local\"]\n",
		name, url, strings.Join(keys, "\n"), name, name)
}

// statusOf waits for a status record event of source from index from on.
func statusOf(t *testing.T, r *records, event, source string, from int) (int, stream.Decoded) {
	t.Helper()
	var got stream.Decoded
	i := r.wait(t, event+" of "+source, from, func(d stream.Decoded) bool {
		if d.Type == "status" && d.Event == event && d.Source == source {
			got = d
			return true
		}
		return false
	})
	return i, got
}

// firstResult waits for the first result of pipeline from index from on.
func rtspFirstResult(t *testing.T, r *records, pipeline string, from int) (int, stream.Decoded) {
	t.Helper()
	var got stream.Decoded
	i := r.wait(t, "a result of "+pipeline, from, func(d stream.Decoded) bool {
		if d.Type == "result" && d.Pipeline == pipeline {
			got = d
			return true
		}
		return false
	})
	return i, got
}

// TestRTSPServerRestart kills the camera (SIGKILL: nothing more is sent)
// and starts it again on the same port, EDGED_RTSP_RESTARTS times (2),
// each after the camera ran EDGED_RTSP_HOLD (0) and was down
// EDGED_RTSP_DOWN (300ms): source_down says why, and the first result
// after the camera returns was captured after it returned (no stale frame
// re-served: no frame twice, none captured while it was down; frames in
// flight at the kill may still come). The time from the server listening
// again to the first result of a frame captured after it returned is
// logged with its p50 (docs/PERFORMANCE.md: 20 restarts); source_up is
// announced (after a run of 10 s when the restarts come quicker).
func TestRTSPServerRestart(t *testing.T) {
	lib := needORT(t)
	needAVCodec(t)
	restarts, hold, down := 2, time.Duration(0), 300*time.Millisecond
	if v := os.Getenv("EDGED_RTSP_RESTARTS"); v != "" {
		fmt.Sscan(v, &restarts)
	}
	if v, err := time.ParseDuration(os.Getenv("EDGED_RTSP_HOLD")); err == nil {
		hold = v
	}
	if v, err := time.ParseDuration(os.Getenv("EDGED_RTSP_DOWN")); err == nil {
		down = v
	}
	g := rtsptest.StartGStreamer(t, "--width", "320", "--height", "240", "--fps", "30", "--gop", "30")
	cfg, sock, _ := rtspConfig(t, t.TempDir(), g.URL, `transport = "tcp"`)
	d := start(t, lib, cfg, sock)
	r := readRecords(t, sock)
	at, _ := rtspFirstResult(t, r, "demo", 0)
	var took []time.Duration
	for i := 0; i < restarts; i++ {
		time.Sleep(hold)
		kill := sensors.Now()
		g.Stop()
		idx, rec := statusOf(t, r, "source_down", "cam0", at)
		if rec.Reason == "" {
			fatalf(t, "source_down without a reason")
		}
		time.Sleep(down)
		g.Restart()
		back := sensors.Now()
		t0 := time.Now()
		// The first result of a frame captured after the camera returned;
		// before it only frames in flight when it was killed may come.
		at = r.wait(t, "a result after the camera returned", idx, func(d stream.Decoded) bool {
			if d.Type != "result" || d.Pipeline != "demo" {
				return false
			}
			if d.TCapture >= kill && d.TCapture < back {
				errorf(t, "restart %d: a result captured while the camera was down", i)
			}
			return d.TCapture >= back
		})
		took = append(took, time.Since(t0))
		if i == 0 {
			t.Logf("source_down reason: %s", rec.Reason)
		}
	}
	statusOf(t, r, "source_up", "cam0", at-1)
	seen := map[uint64]bool{}
	for _, x := range r.since(0) {
		if x.Type == "result" {
			if seen[x.FrameSeq] {
				errorf(t, "frame %d served twice", x.FrameSeq)
			}
			seen[x.FrameSeq] = true
		}
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("first result after the server returned (down %v, held %v), %d restarts: p50 %v, min %v, max %v (all: %v)", down, hold, len(took),
		sorted[len(sorted)/2].Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), took)
	if code, _ := d.stop(t); code != 0 {
		fatalf(t, "exit %d", code)
	}
}

// TestRTSPDeadCameras runs three network cameras at once: cam0 healthy,
// cam1 a server that accepts TCP and never answers DESCRIBE, cam2 a camera
// that keeps its session but stops sending video after 3 s. cam1 is
// waited for (optional) and STATUS= says so; cam2's silence is caught
// within its 1 s timeout, gortsplib's 1 s checks and some slack for a
// loaded machine (source_down within 4 s: no video, or the TCP timeout
// when the server sends no RTCP either), and no result after that
// source_down is of a frame from before it; cam0's results keep coming
// throughout.
func TestRTSPDeadCameras(t *testing.T) {
	lib := needORT(t)
	needAVCodec(t)
	good := rtsptest.StartGStreamer(t, "--width", "320", "--height", "240", "--fps", "15", "--gop", "15")
	silent := rtsptest.StartGStreamer(t, "--mode", "silent")
	stall := rtsptest.StartGStreamer(t, "--width", "320", "--height", "240", "--fps", "15", "--gop", "15", "--stall-after", "3")
	cfg, sock, _ := rtspConfig(t, t.TempDir(), good.URL, `transport = "tcp"`)
	extraCamera(t, cfg, "cam1", silent.URL, `optional = true`, `timeout = "1s"`)
	extraCamera(t, cfg, "cam2", stall.URL, `timeout = "1s"`, `transport = "tcp"`)
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path)
	r := readRecords(t, sock)
	from, _ := rtspFirstResult(t, r, "cam2", 0)
	if l := stall.Line(10 * time.Second); l != "STALLED" {
		fatalf(t, "the stalling server printed %q, want STALLED", l)
	}
	// The source_down of the stall is the first after it: on a loaded
	// machine cam2 can time out (1 s) and come back before the stall.
	stalled, atStall := time.Now(), r.len()
	down, rec := statusOf(t, r, "source_down", "cam2", max(from, atStall))
	if took := time.Since(stalled); took > 4*time.Second || !strings.Contains(rec.Reason, "no video") && !strings.Contains(rec.Reason, "timeout") {
		fatalf(t, "cam2's silence: source_down %v after the stall (timeout 1s), reason %q", took.Round(time.Millisecond), rec.Reason)
	}
	// cam0 goes on at its rate while cam1 never answers and cam2 is down.
	r.results(t, "demo", 0, 1)
	c0 := r.len()
	time.Sleep(4 * time.Second)
	n0 := 0
	for _, x := range r.since(c0) {
		if x.Type == "result" && x.Pipeline == "demo" {
			n0++
		}
	}
	// A pipeline held up by another camera would give none; the bound
	// leaves room for a loaded machine (three encoders run beside edged).
	if n0 < 10 {
		errorf(t, "cam0 gave %d results in 4 s while the others were dead, want at least 10 of its 60", n0)
	}
	// No result of cam2 after its source_down is of a frame from before it.
	// cam2 reconnects (the server makes a new stream for a new session), and
	// its results come back before a source_up when it flapped: on a loaded
	// machine its first session can time out before the stall, and two runs
	// in a row shorter than 10 s hold source_up back (PROTOCOL.md).
	for _, x := range r.since(down + 1) {
		if x.Type == "result" && x.Pipeline == "cam2" && x.TCapture <= rec.TNs {
			errorf(t, "a result of cam2 after its source_down (t_ns %d) of a frame captured %v before it (frame_seq %d)", rec.TNs, time.Duration(rec.TNs-x.TCapture), x.FrameSeq)
			break
		}
	}
	for _, x := range r.since(0) {
		if x.Type == "result" && x.Pipeline == "cam1" {
			fatalf(t, "a result of cam1, whose server never answers")
		}
	}
	n.waitFor(t, "STATUS= saying cam1 is waited for", 15*time.Second, func(m []string) bool {
		for _, s := range m {
			if strings.HasPrefix(s, "STATUS=") && strings.Contains(s, "cam1 waiting for cam1") && strings.Contains(s, "rtsp over tcp") {
				return true
			}
		}
		return false
	})
	if code, _ := d.stop(t); code != 0 {
		fatalf(t, "exit %d", code)
	}
}

// TestRTSPCredentials: a camera that wants a password. With the wrong one
// check and run exit 78 saying the camera refused it, and the password is
// in neither output; with the right one (from password_file, its newline
// dropped) results come.
func TestRTSPCredentials(t *testing.T) {
	lib := needORT(t)
	needAVCodec(t)
	const right, wrong = "s3cret-Pw", "wr0ng-Pw"
	g := rtsptest.StartGStreamer(t, "--width", "320", "--height", "240", "--fps", "15", "--user", "cam", "--password", right)
	dir := t.TempDir()
	pw := filepath.Join(dir, "camera.password")
	if err := os.WriteFile(pw, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, sock, _ := rtspConfig(t, dir, g.URL, `username = "cam"`, fmt.Sprintf("password_file = %q", pw))
	out, code := checkOutput(t, lib, cfg)
	if code != exitConfig || !strings.Contains(out, "unauthorized") || strings.Contains(out, wrong) {
		fatalf(t, "edged check with the wrong password: exit %d, want %d saying unauthorized without the password:\n%s", code, exitConfig, out)
	}
	d := start(t, lib, cfg, sock)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		fatalf(t, "edged run with the wrong password did not exit")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != exitConfig || strings.Contains(d.stderr.String(), wrong) || !strings.Contains(d.stderr.String(), "unauthorized") {
		fatalf(t, "edged run with the wrong password: exit %d, want %d saying unauthorized without the password:\n%s", code, exitConfig, d.stderr.String())
	}
	if err := os.WriteFile(pw, []byte(right+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d = start(t, lib, cfg, sock)
	r := readRecords(t, sock)
	r.results(t, "demo", 0, 5)
	if code, _ := d.stop(t); code != 0 || strings.Contains(d.stderr.String(), right) {
		fatalf(t, "exit %d; the password in the log: %v", code, strings.Contains(d.stderr.String(), right))
	}
}

// TestRTSPResolutionChange: a camera that changes its size mid-stream is
// followed. A smaller picture fits the slots (preprocessing takes each
// frame's own format): results go on. A larger one than the slots hold
// ends the session (source_down naming both sizes), the frame pool is
// made again for the new size once its slots are back, and results go on
// from the new session: edged keeps running.
func TestRTSPResolutionChange(t *testing.T) {
	lib := needORT(t)
	needAVCodec(t)
	for _, tc := range []struct {
		name, from, to string
		grow           bool
	}{{"smaller", "640x480", "320x240", false}, {"larger", "320x240", "640x480", true}} {
		t.Run(tc.name, func(t *testing.T) {
			w, h, _ := strings.Cut(tc.from, "x")
			g := rtsptest.StartGStreamer(t, "--width", w, "--height", h, "--fps", "15", "--gop", "15", "--resize-after", "3", "--resize-to", tc.to)
			cfg, sock, metrics := rtspConfig(t, t.TempDir(), g.URL, `transport = "tcp"`)
			d := start(t, lib, cfg, sock)
			r := readRecords(t, sock)
			rtspFirstResult(t, r, "demo", 0)
			if l := g.Line(15 * time.Second); l != "RESIZED "+tc.to {
				fatalf(t, "the server printed %q, want RESIZED %s", l, tc.to)
			}
			from := r.len()
			if tc.grow {
				i, rec := statusOf(t, r, "source_down", "cam0", from)
				if !strings.Contains(rec.Reason, "640x480") || !strings.Contains(rec.Reason, "slots hold") {
					fatalf(t, "source_down reason %q: want the new size and what the slots hold", rec.Reason)
				}
				t.Logf("source_down: %s", rec.Reason)
				from = i
			}
			r.results(t, "demo", from, 15)
			if tc.grow {
				waitLog(t, d, "frame pool re-made for the source's new frame size")
				free := scrape(t, metrics, `edged_pool_slots{pipeline="demo",state="free"}`)
				if free < 0 {
					fatalf(t, "no edged_pool_slots after the pool was made again")
				}
			}
			if code, _ := d.stop(t); code != 0 {
				fatalf(t, "exit %d", code)
			}
		})
	}
}

// TestRTSPUDPLoss plays a camera over UDP in a network namespace that drops
// 2 % of UDP datagrams (rtsptest.RunInLossyNetns: root, ip and nft, else
// skipped unless EDGED_REQUIRE_NETNS=1): pictures are dropped until the
// next key picture, counted in edged_rtsp_frames_dropped_total{reason=
// "loss"} and in STATUS=, and the results that come are of whole pictures.
func TestRTSPUDPLoss(t *testing.T) {
	if !rtsptest.InNetns() {
		lib := needORT(t)
		needAVCodec(t)
		rtsptest.Python(t)
		_ = lib // the re-run inside the namespace needs it too
		if dropped := rtsptest.RunInLossyNetns(t, 20, "^TestRTSPUDPLoss$"); dropped == 0 {
			fatalf(t, "nftables dropped nothing")
		}
		return
	}
	lib := needORT(t)
	g := rtsptest.StartGStreamer(t, "--width", "640", "--height", "480", "--fps", "15", "--gop", "15")
	cfg, sock, metrics := rtspConfig(t, t.TempDir(), g.URL, `transport = "udp"`)
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path)
	r := readRecords(t, sock)
	r.results(t, "demo", 0, 3)
	deadline := time.Now().Add(30 * time.Second)
	for scrape(t, metrics, `edged_rtsp_frames_dropped_total{source="cam0",reason="loss"}`) <= 0 {
		if time.Now().After(deadline) {
			fatalf(t, "no picture dropped for loss in 30 s at 2 %% UDP loss")
		}
		time.Sleep(500 * time.Millisecond)
	}
	lost := scrape(t, metrics, `edged_rtsp_packets_lost_total{source="cam0"}`)
	n.waitFor(t, "STATUS= counting the dropped pictures", 15*time.Second, func(m []string) bool {
		for _, s := range m {
			if strings.HasPrefix(s, "STATUS=") && strings.Contains(s, "dropped until a key picture") {
				return true
			}
		}
		return false
	})
	t.Logf("packets lost %v; results %d", lost, r.len())
	if code, _ := d.stop(t); code != 0 {
		fatalf(t, "exit %d", code)
	}
}

// TestRTSPCheckUnreachable: edged check on a camera nobody answers for
// is a warning when the source is optional (run waits for it: exit 0) and
// a problem of the machine otherwise (exit 1), as for other devices.
func TestRTSPCheckUnreachable(t *testing.T) {
	lib := needORT(t)
	url := fmt.Sprintf("rtsp://127.0.0.1:%d/cam", rtsptest.FreePort(t))
	for _, tc := range []struct {
		optional bool
		code     int
		line     string
	}{{true, 0, "  warn  source cam0: "}, {false, exitFailure, "  FAIL  source cam0: "}} {
		cfg, _, _ := rtspConfig(t, t.TempDir(), url, fmt.Sprintf("optional = %v", tc.optional))
		out, code := checkOutput(t, lib, cfg)
		if code != tc.code || !strings.Contains(out, tc.line) || !strings.Contains(out, "connection refused") {
			errorf(t, "optional = %v: exit %d, want %d and %q:\n%s", tc.optional, code, tc.code, tc.line, out)
		}
	}
}

// TestRTSPCheckNamesTheUnitsIPFilter: a network camera on another machine
// is refused by the shipped unit's IPAddressDeny=any: edged check fails it
// (78) with the drop-in line that lets it through, as for an MQTT broker.
func TestRTSPCheckNamesTheUnitsIPFilter(t *testing.T) {
	lib := needORT(t)
	cfg, _, _ := rtspConfig(t, t.TempDir(), "rtsp://192.0.2.10/cam", `optional = true`, `timeout = "200ms"`)
	cmd := edged("check", "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib, "PATH="+fakeSystemctl(t, shippedUnitShow))
	out, _ := cmd.CombinedOutput()
	want := "FAIL  source cam0 (rtsp://192.0.2.10/cam): edged.service refuses connections to 192.0.2.10"
	if code := cmd.ProcessState.ExitCode(); code != exitConfig || !strings.Contains(string(out), want) || !strings.Contains(string(out), "IPAddressAllow=192.0.2.10") {
		fatalf(t, "exit %d, want %d and %q:\n%s", code, exitConfig, want, out)
	}
}

// TestRTSPHardwareDecoderWhereThereIsNone: decoder = "nvdec" on a machine
// without libnvcuvid, and decoder = "v4l2" on one that is no Jetson, are
// the configuration's to fix: check and run both exit 78 saying the
// decoder cannot serve and why, before any camera is asked. (A machine
// that has the decoder skips its case.)
func TestRTSPHardwareDecoderWhereThereIsNone(t *testing.T) {
	lib := needORT(t)
	for _, tc := range []struct {
		decoder, why string
		here         func() error
	}{{"nvdec", "libnvcuvid", func() error { _, err := nvdec.Load(""); return err }},
		{"v4l2", "v4l2", func() error { _, err := v4l2dec.Probe(); return err }}} {
		t.Run(tc.decoder, func(t *testing.T) {
			if tc.here() == nil {
				t.Skipf("%s is here", tc.decoder)
			}
			url := fmt.Sprintf("rtsp://127.0.0.1:%d/cam", rtsptest.FreePort(t))
			cfg, sock, _ := rtspConfig(t, t.TempDir(), url, fmt.Sprintf("decoder = %q", tc.decoder))
			out, code := checkOutput(t, lib, cfg)
			if code != exitConfig || !strings.Contains(out, fmt.Sprintf("decoder = %q", tc.decoder)) || !strings.Contains(out, tc.why) {
				fatalf(t, "edged check: exit %d, want %d naming the decoder and %s:\n%s", code, exitConfig, tc.why, out)
			}
			d := start(t, lib, cfg, sock)
			select {
			case <-d.done:
			case <-time.After(30 * time.Second):
				fatalf(t, "edged run did not exit")
			}
			if code := d.cmd.ProcessState.ExitCode(); code != exitConfig || !strings.Contains(d.stderr.String(), tc.why) {
				fatalf(t, "edged run: exit %d, want %d naming %s:\n%s", code, exitConfig, tc.why, d.stderr.String())
			}
		})
	}
}
