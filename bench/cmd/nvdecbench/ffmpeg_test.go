//go:build cgo && linux

package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestFFmpegBaselineMeasures runs the baseline's harness with ffmpeg
// decoding on the CPU (the GPU machine runs it with -hwaccel cuda): every
// picture fed on the schedule comes back, none is dropped, the CPU time is
// ffmpeg's, and with one decoder thread a picture is out well within its
// period — which it is not unless the access unit delimiter written after
// each picture ends it for ffmpeg's parser.
func TestFFmpegBaselineMeasures(t *testing.T) {
	path, err := exec.LookPath("ffmpeg")
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_FFMPEG") != "" {
			t.Fatal("EDGED_REQUIRE_FFMPEG is set and there is no ffmpeg:", err)
		}
		t.Skip("no ffmpeg on PATH (Debian: apt-get install ffmpeg)")
	}
	const fps, seconds, streams = 30, 1.5, 2
	period := time.Second / fps
	for _, file := range []string{"../../../sensors/h26x/testdata/h264_170x100.h264", "../../../sensors/h26x/testdata/h265_170x100.h265"} {
		s, err := load(file)
		if err != nil {
			t.Fatal(err)
		}
		r, err := measureFFmpeg(baseline{path: path, threads: "1"}, s, streams, period, seconds, 32)
		if err != nil {
			t.Fatal(err)
		}
		want := int(seconds * fps * streams)
		if r.decoded < want-2*streams || r.decoded > want+streams {
			t.Errorf("%s: %d pictures out, want about %d", file, r.decoded, want)
		}
		if r.dropped != 0 {
			t.Errorf("%s: %d dropped at %d streams of 170x100", file, r.dropped, streams)
		}
		if r.perPic <= 0 || r.perStream <= 0 {
			t.Errorf("%s: CPU %s a picture, %.1f %% a stream: ffmpeg's CPU time was not read", file, r.perPic, r.perStream)
		}
		if r.p50 <= 0 || r.p50 >= period {
			t.Errorf("%s: p50 latency %s, want within one period (%s): is the picture held for the next one's start?", file, r.p50, period)
		}
	}
}
