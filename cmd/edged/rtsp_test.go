package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
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
			t.Fatalf("%v, and EDGED_REQUIRE_LIBAVCODEC=1", err)
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
// capture clock is named, and the metrics say the transport.
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
				t.Fatalf("edged check: exit %d, want 0 and %q:\n%s", code, want, out)
			}
			d := start(t, lib, cfg, sock)
			r := readRecords(t, sock)
			res := r.results(t, "demo", 0, 10)
			for _, x := range res {
				if x.CaptureClock != "sender_report" && x.CaptureClock != "arrival" {
					t.Fatalf("t_capture_clock %q, want sender_report or arrival", x.CaptureClock)
				}
			}
			if v := scrape(t, metrics, fmt.Sprintf(`edged_rtsp_transport{source="cam0",transport=%q}`, tc.transport)); v != 1 {
				t.Errorf("edged_rtsp_transport for %s: %v, want 1", tc.transport, v)
			}
			if code, _ := d.stop(t); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
}

var _ = filepath.Join
var _ = time.Second
var _ stream.Decoded
