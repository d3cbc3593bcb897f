package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// run is one measured child: its frames and CPU time.
type run struct {
	side    string // "ffmpeg" or "edged"
	threads string
	frames  int
	cpu     time.Duration
}

func (r run) perFrame() time.Duration { return r.cpu / time.Duration(max(r.frames, 1)) }

// cost runs the ffmpeg program and edged's client, one after the other,
// -rounds times for each thread setting, on the same served stream.
func cost(args []string) error {
	fs := flag.NewFlagSet("cost", flag.ExitOnError)
	file := fs.String("file", "", "Annex-B H.264 file to serve")
	gen := fs.String("gen", "", "folder to make the 1080p30 stream in with ffmpeg when -file is not given")
	addr := fs.String("addr", "127.0.0.1:8654", "server address")
	d := fs.Duration("d", 20*time.Second, "each run's length")
	rounds := fs.Int("rounds", 3, "rounds")
	threadsList := fs.String("threads", "auto,1", "libavcodec thread counts to compare (auto = its choice)")
	sides := fs.String("sides", "ffmpeg,edged", "what to run each round: ffmpeg, edged, edged-nowrite (decoding only, the picture not written into its slot)")
	fs.Parse(args)
	f, err := streamFile(*file, *gen)
	if err != nil {
		return err
	}
	srv, err := startServer(f, *addr)
	if err != nil {
		return err
	}
	defer srv.kill()
	fmt.Printf("stream %s served at %s; %d rounds of %v each; load average %s at the start\n", f, srv.URL, *rounds, *d, loadavg())
	var runs []run
	for round := 1; round <= *rounds; round++ {
		for _, th := range strings.Split(*threadsList, ",") {
			for _, side := range strings.Split(*sides, ",") {
				r, err := measure(side, th, srv.URL, *d)
				if err != nil {
					return err
				}
				runs = append(runs, r)
				fmt.Printf("round %d  %-6s threads=%-4s %5d frames  %7.2f s CPU  %6.3f ms/frame  (load %s)\n",
					round, side, th, r.frames, r.cpu.Seconds(), float64(r.perFrame().Microseconds())/1000, loadavg())
			}
		}
	}
	fmt.Println()
	for _, th := range strings.Split(*threadsList, ",") {
		ff := medianCost(runs, "ffmpeg", th)
		for _, side := range strings.Split(*sides, ",") {
			m := medianCost(runs, side, th)
			fmt.Printf("threads=%-4s %-13s median CPU per frame %.3f ms, ratio to ffmpeg %.2f\n", th, side, float64(m.Microseconds())/1000, float64(m)/float64(ff))
		}
	}
	return nil
}

func medianCost(runs []run, side, threads string) time.Duration {
	var v []time.Duration
	for _, r := range runs {
		if r.side == side && r.threads == threads {
			v = append(v, r.perFrame())
		}
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// measure runs one side for d and returns its frames and CPU time.
func measure(side, threads, url string, d time.Duration) (run, error) {
	r := run{side: side, threads: threads}
	n := "0"
	if threads != "auto" {
		n = threads
	}
	var cmd *exec.Cmd
	if side == "ffmpeg" {
		cmd = exec.Command("ffmpeg", "-hide_banner", "-nostats", "-loglevel", "error", "-threads", n, "-rtsp_transport", "tcp",
			"-i", url, "-t", strconv.FormatFloat(d.Seconds(), 'f', 1, 64), "-f", "null", "-", "-progress", "pipe:1")
	} else {
		self, err := os.Executable()
		if err != nil {
			return r, err
		}
		cmd = exec.Command(self, "client", "-url", url, "-d", d.String(), "-warm", "0s", "-threads", n, "-write="+strconv.FormatBool(side != "edged-nowrite"))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "frame="); ok && side == "ffmpeg" {
			r.frames, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if strings.HasPrefix(line, "RESULT ") {
			res, err := parseResult(line)
			if err != nil {
				return r, err
			}
			r.frames = res.all
			if res.overrun > 0 {
				fmt.Printf("  (edged dropped %d access units: the decoder fell behind)\n", res.overrun)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return r, fmt.Errorf("%s: %w", side, err)
	}
	r.cpu = cpuOf(cmd)
	return r, nil
}
