package rtsptest

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

//go:embed rtsp_server.py
var serverScript []byte

// The Python of Debian's python3-gi: a python3 earlier on PATH (pyenv's)
// has no gi module.
var pythons = []string{"/usr/bin/python3", "python3"}

const gstProbe = `import gi
gi.require_version("Gst", "1.0"); gi.require_version("GstRtspServer", "1.0")
from gi.repository import Gst, GstRtspServer
Gst.init(None)
missing = [e for e in ("x264enc", "x265enc", "rtph264pay", "rtph265pay", "videotestsrc", "valve") if not Gst.ElementFactory.find(e)]
print("missing:" + ",".join(missing) if missing else "ok")`

var (
	gstOnce sync.Once
	gstPy   string
	gstErr  error
)

// Python returns the python3 that runs rtsp_server.py, or skips the test
// (fails it under EDGED_REQUIRE_GSTREAMER=1) when GStreamer's RTSP server,
// its Python binding or an encoder is missing.
func Python(tb testing.TB) string {
	tb.Helper()
	gstOnce.Do(func() {
		gstErr = fmt.Errorf("no python3 found")
		for _, p := range pythons {
			out, err := exec.Command(p, "-c", gstProbe).CombinedOutput()
			s := strings.TrimSpace(string(out))
			if err == nil && s == "ok" {
				gstPy, gstErr = p, nil
				return
			}
			if err == nil {
				err = errors.New(lastLine(s)) // "missing:x265enc"
			}
			gstErr = fmt.Errorf("%s: %w", p, err)
		}
	})
	if gstErr != nil {
		const pkgs = "apt-get install python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly gstreamer1.0-plugins-bad"
		if os.Getenv("EDGED_REQUIRE_GSTREAMER") == "1" {
			tb.Fatalf("GStreamer's RTSP server is not usable (%v), and EDGED_REQUIRE_GSTREAMER=1 (%s)", gstErr, pkgs)
		}
		tb.Skipf("GStreamer's RTSP server is not usable (%v): %s; EDGED_REQUIRE_GSTREAMER=1 makes this a failure", gstErr, pkgs)
	}
	return gstPy
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// GStreamer is a running rtsp_server.py.
type GStreamer struct {
	tb   testing.TB
	py   string
	args []string
	Port int
	URL  string // rtsp://127.0.0.1:PORT/cam, no credentials

	mu    sync.Mutex
	cmd   *exec.Cmd
	lines chan string // its stdout after READY (RESIZED, STALLED)
	done  chan struct{}
}

// StartGStreamer runs rtsp_server.py with args (its options: --codec,
// --width, --height, --gop, --user/--password, --protocols, --resize-after,
// --stall-after, --mode silent, ...) on a free port (unless args set
// --port) and waits until it listens. The server is stopped at the end of
// the test.
func StartGStreamer(tb testing.TB, args ...string) *GStreamer {
	tb.Helper()
	py := Python(tb)
	g := &GStreamer{tb: tb, py: py, args: args}
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			fmt.Sscanf(args[i+1], "%d", &g.Port)
		}
	}
	if g.Port == 0 {
		g.Port = FreePort(tb)
		g.args = append(g.args, "--port", fmt.Sprint(g.Port))
	}
	g.start()
	tb.Cleanup(g.Stop)
	return g
}

func (g *GStreamer) start() {
	g.tb.Helper()
	script := filepath.Join(g.tb.TempDir(), "rtsp_server.py")
	if err := os.WriteFile(script, serverScript, 0o755); err != nil {
		g.tb.Fatal(err)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		cmd := exec.Command(g.py, append([]string{script}, g.args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			g.tb.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &limitWriter{w: &stderr, n: 8 << 10}
		if err := cmd.Start(); err != nil {
			g.tb.Fatal(err)
		}
		ready := make(chan string, 1)
		lines := make(chan string, 64)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				l := sc.Text()
				if strings.HasPrefix(l, "READY ") {
					ready <- strings.TrimPrefix(l, "READY ")
					continue
				}
				select {
				case lines <- l:
				default:
				}
			}
			io.Copy(io.Discard, out)
		}()
		select {
		case u := <-ready:
			g.mu.Lock()
			g.cmd, g.lines, g.done, g.URL = cmd, lines, done, u
			g.mu.Unlock()
			return
		case <-done:
			cmd.Wait()
			lastErr = fmt.Errorf("rtsp_server.py %v exited before READY: %s", g.args, stderr.String())
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			lastErr = fmt.Errorf("rtsp_server.py %v: no READY within 30 s: %s", g.args, stderr.String())
		}
		time.Sleep(time.Duration(try+1) * 300 * time.Millisecond) // the port may linger
	}
	g.tb.Fatal(lastErr)
}

// Line waits up to d for the next line the server prints after READY
// ("RESIZED 1280x720", "STALLED") and returns it, "" on timeout.
func (g *GStreamer) Line(d time.Duration) string {
	g.mu.Lock()
	lines := g.lines
	g.mu.Unlock()
	select {
	case l := <-lines:
		return l
	case <-time.After(d):
		return ""
	}
}

// Stop kills the server (SIGKILL: a camera losing power sends nothing
// more) and waits for it; it is idempotent.
func (g *GStreamer) Stop() {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.cmd = nil
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
	cmd.Wait()
}

// Restart starts the server again on the same port.
func (g *GStreamer) Restart() {
	g.tb.Helper()
	g.Stop()
	g.start()
}

type limitWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
