package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/procfs"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// Hostile inputs through the real binary, under systemd's conditions (a
// fake NOTIFY_SOCKET with WATCHDOG_USEC of 15 s, as the unit sets): sizes
// an input declares, waits a recording asks for, sources that fail as
// soon as they start.

// replayConfig writes a configuration replaying path (a recording or an
// image folder) through the built-in model to a socket, with /metrics on
// a Unix socket; source adds keys to the source, daemon to [daemon].
func replayConfig(t *testing.T, dir, path, source, daemon string) (cfg, sock, metrics string) {
	t.Helper()
	sock, metrics = filepath.Join(dir, "edged.sock"), filepath.Join(dir, "metrics.sock")
	text := fmt.Sprintf(`[daemon]
metrics_listen = "unix:%s"
%s
[[source]]
name = "cam"
kind = "replay"
path = %q
%s
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam"
model = "demo"
sinks = ["local"]
[[sink]]
name = "local"
kind = "socket"
path = %q
`, metrics, daemon, path, source, sock)
	cfg = filepath.Join(dir, "edged.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, sock, metrics
}

const watchdog15s = "WATCHDOG_USEC=15000000"

// TestHostileImagesInAReplayedFolder: PNGs of a few hundred bytes that
// declare 65535x65535, 30000x30000 and 16000x16000 16-bit RGBA, and junk,
// among the images of a looping 64x48 folder. Before, only the first
// image's size was checked: image/png allocated what the header declared
// ("fatal error: runtime: out of memory" within a second, exit 2, a crash
// loop under Restart=always; 7 GB and 2 GB peaks for the smaller ones).
// Now every image's header is compared with the folder's size before it is
// decoded: the bad ones are skipped and counted
// (edged_frames_dropped_total{reason="corrupt"}), the log names one of
// them, the good ones keep producing results pass after pass, the
// watchdog keeps being fed and edged's peak RSS stays far below one
// declared image.
func TestHostileImagesInAReplayedFolder(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	imgs := filepath.Join(dir, "frames")
	os.Mkdir(imgs, 0o755)
	for i, c := range []color.RGBA{{200, 30, 30, 255}, {30, 170, 40, 255}, {30, 60, 200, 255}} {
		img := image.NewRGBA(image.Rect(0, 0, 64, 48))
		for p := 0; p < len(img.Pix); p += 4 {
			img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = c.R, c.G, c.B, 255
		}
		f, err := os.Create(filepath.Join(imgs, fmt.Sprintf("%02d.png", 2*i)))
		if err != nil {
			t.Fatal(err)
		}
		png.Encode(f, img)
		f.Close()
	}
	for name, b := range map[string][]byte{
		"01-65535.png": sensorstest.PNGClaiming(65535, 65535),
		"03-30000.png": sensorstest.PNGClaiming(30000, 30000),
		"05-16000.png": sensorstest.PNGClaiming(16000, 16000),
		"06-junk.jpg":  []byte("\xff\xd8 not really"),
	} {
		if err := os.WriteFile(filepath.Join(imgs, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, sock, metrics := replayConfig(t, dir, imgs, "loop = true\nfps = 100.0", "")
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, watchdog15s)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	// 7 files a pass: 60 results are 20 passes over the bad images.
	res := r.results(t, "p", 0, 60)
	if last := res[len(res)-1].FrameSeq; last < 59 {
		t.Errorf("last frame_seq %d", last)
	}
	waitLog(t, d, "frame skipped")
	log := d.stderr.String()
	if !strings.Contains(log, "is a 65535x65535 PNG; the folder's images are 64x48") && !strings.Contains(log, "is a 30000x30000 PNG") &&
		!strings.Contains(log, "is a 16000x16000 PNG") && !strings.Contains(log, "06-junk.jpg") {
		t.Errorf("the log does not name a skipped image:\n%s", log)
	}
	if got := scrape(t, metrics, `edged_frames_dropped_total{pipeline="p",reason="corrupt"}`); got < 20*4-4 {
		t.Errorf("edged_frames_dropped_total{reason=\"corrupt\"} = %v after 20 passes of 4 bad images", got)
	}
	if strings.Count(log, "frame skipped") > 2 {
		t.Errorf("skips are logged more than once per 10 s:\n%s", log)
	}
	m, err := procfs.ReadMem(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if peak := int64(m.HWM) << 10; peak > 512<<20 {
		t.Errorf("edged's peak RSS is %d MiB", peak>>20)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
