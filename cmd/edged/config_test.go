package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
)

// valueAt is "line:column" of the value in the first occurrence of s in
// text (what follows "= " in s, else s itself), as problems name it.
func valueAt(text, s string) string {
	i := strings.Index(text, s)
	if i < 0 {
		return "?:?"
	}
	line := 1 + strings.Count(text[:i], "\n")
	col := i - strings.LastIndexByte(text[:i], '\n')
	if j := strings.Index(s, "= "); j >= 0 {
		col += j + 2
	}
	return fmt.Sprintf("%d:%d", line, col)
}

// recordAt writes a recording of n grey 64x48 YUYV frames captured gap
// apart.
func recordAt(t *testing.T, path string, n int, gap time.Duration) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	format := sensors.Format{Width: 64, Height: 48, Pixel: sensors.YUYV}
	w, err := replay.NewRecorder(f, format)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, format.FrameSize())
	for i := range frame {
		frame[i] = 128
	}
	for i := range n {
		if err := w.WriteFrame(frame, int64(i)*int64(gap), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestReplayFreeRun is issue 19's finding that a replay could not be made
// to free-run from the configuration, and that fps = 0 was "free-running"
// in the range error but "the recorded pace" in configs/edged.toml. A
// recording paced at 5 frames a second plays at that pace with fps = 0 and
// as fast as the pipeline takes frames with free_run = true; the range
// error says what 0 means for the source's kind, and free_run is refused
// where it means nothing.
func TestReplayFreeRun(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "paced.edgedraw")
	recordAt(t, rec, 10, 200*time.Millisecond)
	rate := func(extra string) float64 {
		sock := filepath.Join(dir, "e.sock")
		cfg := filepath.Join(dir, "replay.toml")
		text := fmt.Sprintf(`[[source]]
name = "cam"
kind = "replay"
path = %q
loop = true
%s
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam"
model = "demo"
schedule = "queue"
sinks = ["local"]
[[sink]]
name = "local"
kind = "socket"
path = %q
`, rec, extra, sock)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		d := start(t, lib, cfg, sock)
		r := readRecords(t, sock)
		r.results(t, "p", 0, 1)
		from := r.len()
		time.Sleep(1500 * time.Millisecond)
		last := r.since(from)
		if code, _ := d.stop(t); code != 0 {
			t.Fatalf("%s: exit %d:\n%s", extra, code, d.stderr.String())
		}
		n := 0
		var t0, t1 int64
		for _, rec := range last {
			if rec.Type == "result" {
				if n == 0 {
					t0 = rec.TCapture
				}
				t1 = rec.TCapture
				n++
			}
		}
		if n < 2 {
			t.Fatalf("%s: %d results in 1.5 s", extra, n)
		}
		return float64(n-1) / (float64(t1-t0) / 1e9)
	}
	paced, free := rate("fps = 0.0"), rate("free_run = true")
	t.Logf("recorded at 5 frames/s: fps = 0 plays %.1f frames/s, free_run = true %.0f", paced, free)
	if paced < 3 || paced > 7 {
		t.Errorf("fps = 0: %.1f frames/s, want the recorded 5", paced)
	}
	if free < 50 {
		t.Errorf("free_run = true: %.1f frames/s, want far more than the recorded 5", free)
	}

	for _, c := range []struct{ kind, extra, want string }{
		{"replay", "path = \"" + rec + "\"\nfps = -1.0", `source[0].fps: must be between 0 (the recorded pace; free_run = true plays every frame at once) and 1000 frames per second`},
		{"synthetic", "width = 64\nheight = 48\nfps = 2000.0", `source[0].fps: must be between 0 (as fast as the pipeline takes frames) and 1000 frames per second`},
		{"synthetic", "width = 64\nheight = 48\nfree_run = true", `source[0].free_run: is for replay sources (a synthetic source: fps = 0 is as fast as the pipeline takes frames)`},
	} {
		cfg, _ := testConfig(t, dir, `kind = "synthetic"        # v4l2 | synthetic | replay | serial
optional = false          # true: a missing device is waited for instead of failing the start
width = 640               # required: frame size in pixels (replay: taken from the recording)
height = 480
format = "YUYV"           # YUYV | UYVY | NV12 | GREY | RGB24 | BGR24 | MJPEG
fps = 30.0 `, "kind = \""+c.kind+"\"\n"+c.extra+" ")
		code, stderr := runBriefly(t, lib, "run", cfg)
		if code != 78 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s with %q: exit %d, want 78 and %q:\n%s", c.kind, c.extra, code, c.want, stderr)
		}
	}
}
