package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rtspbench serve|client|cost|streams|recovery [flags] (see doc.go)")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serve(args)
	case "client":
		err = client(args)
	case "cost":
		err = cost(args)
	case "streams":
		err = streams(args)
	case "recovery":
		err = recovery(args)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rtspbench:", err)
		os.Exit(1)
	}
}

// serve serves -file at -addr until killed, printing READY URL once it
// listens.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	file := fs.String("file", "", "Annex-B H.264 file")
	addr := fs.String("addr", "127.0.0.1:8654", "listen address")
	noSR := fs.Bool("no-sr", false, "send no RTCP sender reports (frames' capture time is then their arrival)")
	fs.Parse(args)
	aus, err := rtsptest.ReadAccessUnits(*file, h26x.H264)
	if err != nil {
		return err
	}
	srv, err := rtsptest.StartFileServer(rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, Address: *addr, NoSenderReports: *noSR})
	if err != nil {
		return err
	}
	fmt.Println("READY", srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Close()
	return nil
}

// server is a running rtspbench serve.
type server struct {
	cmd *exec.Cmd
	URL string
}

// startServer runs rtspbench serve as a child and waits for READY.
func startServer(file, addr string, flags ...string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{"serve", "-file", file, "-addr", addr}, flags...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "READY ") {
		cmd.Process.Kill()
		cmd.Wait()
		if err == nil {
			err = errors.New("no READY line")
		}
		return nil, fmt.Errorf("serve printed %q: %w", line, err)
	}
	return &server{cmd: cmd, URL: strings.TrimSpace(strings.TrimPrefix(line, "READY "))}, nil
}

// kill stops it at once (a camera losing power).
func (s *server) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// streamFile returns -file, or makes the stream under -gen with ffmpeg.
func streamFile(file, gen string) (string, error) {
	if file != "" {
		return file, nil
	}
	if gen == "" {
		return "", errors.New("-file or -gen is required")
	}
	f := filepath.Join(gen, "h264_1080p30_gop30.h264")
	if _, err := os.Stat(f); err == nil {
		return f, nil
	}
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30", "-t", "10",
		"-c:v", "libx264", "-preset", "medium", "-profile:v", "high", "-pix_fmt", "yuv420p", "-g", "30", "-keyint_min", "30", "-sc_threshold", "0",
		"-b:v", "4M", "-maxrate", "4M", "-bufsize", "4M", "-bf", "0", "-bsf:v", "h264_mp4toannexb", "-f", "h264", f)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("making %s with ffmpeg: %w", f, err)
	}
	return f, nil
}

// cpuOf is a finished child's user + system CPU time.
func cpuOf(cmd *exec.Cmd) time.Duration {
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadavg is the first field of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
