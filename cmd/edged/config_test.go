package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

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
		cfg, _ := testConfig(t, dir, `kind = "synthetic"        # v4l2 | synthetic | replay | rtsp | serial
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

// foreignKeys are keys of other kinds that a table of a kind must not
// show: the keys each kind has alone.
var foreignKeys = map[string]map[string][]string{
	"source": {
		"v4l2":      {"seed", "period", "path", "loop", "free_run", "baud", "protocol", "columns", "ring"},
		"synthetic": {"device", "io", "path", "loop", "free_run", "baud", "protocol", "columns", "ring"},
		"replay":    {"device", "io", "seed", "period", "baud", "protocol", "columns", "ring"},
		"serial":    {"width", "height", "format", "fps", "buffers", "io", "seed", "period", "path", "loop", "free_run"},
	},
	"sink": {
		"socket": {"device", "baud", "data_bits", "parity", "stop_bits", "queue", "max_frame_bytes", "url", "topic", "qos", "password_file", "queue_bytes"},
		"serial": {"path", "mode", "group", "max_clients", "client_queue", "allow_uids", "url", "topic", "qos", "queue_bytes"},
		"mqtt":   {"path", "mode", "group", "max_clients", "client_queue", "allow_uids", "device", "baud", "parity", "max_frame_bytes"},
	},
}

// TestConfigPrintWhateverTheMachineLacks is issue 19's fourth finding:
// edged config print refused configs/examples/jetson-usb-camera.toml on a
// machine without its engine file (only the missing-file error, exit 78),
// so nobody could see the effective configuration while writing one, and
// it printed the keys of other kinds as zeros (baud = 0, url = "" under a
// socket sink). Now it prints every example, with what this machine lacks
// said after it on stderr (exit 0), and each table holds the keys of its
// kind alone. A configuration with problems is printed as far as it was
// understood, marked so, and exits 78.
func TestConfigPrintWhateverTheMachineLacks(t *testing.T) {
	examples, err := filepath.Glob("../../configs/examples/*.toml")
	if err != nil || len(examples) < 3 {
		t.Fatalf("examples: %v %v", examples, err)
	}
	kinds := map[string]bool{}
	for _, ex := range append(examples, "../../configs/edged.toml") {
		out, stderr, code := runCmd(t, 30*time.Second, "config", "print", "-config", ex)
		if code != 0 || !strings.HasPrefix(out, "# effective configuration from "+ex) {
			t.Errorf("%s: exit %d:\n%s%s", ex, code, out, stderr)
			continue
		}
		if stderr != "" && !strings.HasPrefix(stderr, "edged config print: warning: on this machine edged run and edged check would refuse "+ex+":\n") {
			t.Errorf("%s: stderr is not the warning:\n%s", ex, stderr)
		}
		var printed map[string]any
		if _, err := toml.Decode(out, &printed); err != nil {
			t.Fatalf("%s: the printed configuration is not TOML: %v", ex, err)
		}
		for table, byKind := range foreignKeys {
			list, _ := printed[table].([]map[string]any)
			for i, tab := range list {
				kind, _ := tab["kind"].(string)
				kinds[table+" "+kind] = true
				for _, k := range byKind[kind] {
					if _, ok := tab[k]; ok {
						t.Errorf("%s: %s[%d] (kind %q) prints %s, a key of another kind", ex, table, i, kind, k)
					}
				}
			}
		}
	}
	if len(kinds) < 5 {
		t.Errorf("the examples cover only %v", kinds)
	}
	usb := "../../configs/examples/jetson-usb-camera.toml"
	out, stderr, _ := runCmd(t, 30*time.Second, "config", "print", "-config", usb)
	for _, want := range []string{`path = "/var/lib/edged/models/yolov8n.engine"`, `kind = "detections"`, `score_threshold = 0.35`} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the printed configuration lacks %q", usb, want)
		}
	}
	if !strings.Contains(stderr, "model[0].path: model file /var/lib/edged/models/yolov8n.engine: no such file or directory") {
		t.Errorf("%s: the missing engine is not said after the configuration:\n%s", usb, stderr)
	}

	dir := t.TempDir()
	cfg, _ := testConfig(t, dir, `fps = 30.0`, `fsp = 30.0`)
	out, stderr, code := runCmd(t, 30*time.Second, "config", "print", "-config", cfg)
	if code != 78 || !strings.Contains(out, "NOT VALID") || !strings.Contains(out, `name = "cam0"`) || !strings.Contains(stderr, `source[0].fsp: unknown key; did you mean "fps"?`) {
		t.Errorf("invalid configuration: exit %d, want 78, the configuration marked NOT VALID and the problem:\n%s%s", code, out, stderr)
	}
}
