package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// streams plays 1, 2, ... -max streams of the served stream in one client
// process for -d each, until one of them cannot keep up: any access unit
// dropped because the decoder fell behind, frames 1 s or more behind
// their arrival (p99), or fewer than 90 % of the 30 a second in the time
// (the window's edges cost a few).
func streams(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ExitOnError)
	file := fs.String("file", "", "Annex-B H.264 file to serve")
	gen := fs.String("gen", "", "folder to make the 1080p30 stream in with ffmpeg when -file is not given")
	addr := fs.String("addr", "127.0.0.1:8655", "server address")
	d := fs.Duration("d", 20*time.Second, "each run's measured length")
	maxN := fs.Int("max", 12, "most streams to try")
	threads := fs.String("threads", "1", "libavcodec threads per stream (0: its choice)")
	fs.Parse(args)
	f, err := streamFile(*file, *gen)
	if err != nil {
		return err
	}
	srv, err := startServer(f, *addr, "-no-sr")
	if err != nil {
		return err
	}
	defer srv.kill()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("stream %s at %s, %v per run, libavcodec threads %s; load average %s at the start\n", f, srv.URL, *d, *threads, loadavg())
	best := 0
	for n := 1; n <= *maxN; n++ {
		s0 := procCPU(srv.cmd.Process.Pid)
		cmd := exec.Command(self, "client", "-url", srv.URL, "-n", strconv.Itoa(n), "-d", d.String(), "-threads", *threads)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		var res clientResult
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "RESULT ") {
				res, _ = parseResult(sc.Text())
			}
		}
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("%d streams: %w", n, err)
		}
		cpu, srvCPU := cpuOf(cmd), procCPU(srv.cmd.Process.Pid)-s0
		lowest := res.frames[0]
		for _, x := range res.frames {
			lowest = min(lowest, x)
		}
		want := int(30 * res.seconds * 0.9)
		ok := lowest >= want && res.overrun == 0 && res.p99 < time.Second
		fmt.Printf("%2d streams: fewest frames %d of ≥%d, overrun %d, client CPU %.2f ms/frame (%.0f%% of a core), server %.0f%% of a core, ready−arrival p50 %v p99 %v, Go allocations %.1f/frame, load %s: %s\n",
			n, lowest, want, res.overrun, float64(cpu.Microseconds())/1000/float64(max(res.all, 1)), 100*cpu.Seconds()/(res.seconds+2),
			100*srvCPU.Seconds()/(res.seconds+2), res.p50, res.p99, res.mallocs, loadavg(), map[bool]string{true: "kept up", false: "FELL BEHIND"}[ok])
		if !ok {
			break
		}
		best = n
	}
	fmt.Printf("sustained: %d streams of 1080p30\n", best)
	return nil
}

// procCPU is a process's user + system time from /proc/PID/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * (time.Second / 100) // USER_HZ
}
