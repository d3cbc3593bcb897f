package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runSpec is one measured run of one side.
type runSpec struct {
	Side, Input, Phase string
	Argv               []string
	Env                []string // added to the harness's environment
	Socket             string   // the side's result socket
	Log                string   // stdout and stderr go here
	Warmup, Measure    time.Duration
	StartTimeout       time.Duration // until the first result
	PaceFPS            float64       // edged paced runs: the source's fps
}

// RunResult is what one run measured.
type RunResult struct {
	Side       string          `json:"side"`
	Input      string          `json:"input"`
	Phase      string          `json:"phase"` // saturation | paced | loop
	Round      int             `json:"round"`
	PaceFPS    float64         `json:"pace_fps,omitempty"`
	Argv       []string        `json:"argv"`
	Log        string          `json:"log"`
	WindowS    float64         `json:"window_s"`
	Results    int             `json:"results"`
	Lost       uint64          `json:"lost"`       // records lost to seq gaps in the window
	Throughput float64         `json:"throughput"` // (results + lost) / window, per second
	CPUS       float64         `json:"cpu_s"`      // utime + stime over the window
	CPUPerFrMs float64         `json:"cpu_ms_per_frame"`
	RSSAvgMiB  float64         `json:"rss_avg_mib"` // VmRSS sampled every 100 ms in the window
	RSSMaxMiB  float64         `json:"rss_max_mib"`
	HWMMiB     float64         `json:"rss_hwm_mib"` // VmHWM at the end: the peak over the whole run
	Stages     map[string]Dist `json:"stages"`
	Info       json.RawMessage `json:"info,omitempty"` // loop.py's versions and threads
	BadLines   int             `json:"bad_lines,omitempty"`
}

// measure starts the side, connects to its socket, discards the warm-up,
// measures, stops it, and returns the measurements and every record read
// (for the raw dump).
func measure(ctx context.Context, spec runSpec) (*RunResult, []arrival, error) {
	logf, err := os.Create(spec.Log)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# %s\n", strings.Join(spec.Argv, " "))
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the harness dies the side must not run on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		// A sandbox without PR_SET_PDEATHSIG: start without it.
		cmd = exec.Command(spec.Argv[0], spec.Argv[1:]...)
		cmd.Env = append(os.Environ(), spec.Env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err2 := cmd.Start(); err2 != nil {
			return nil, nil, fmt.Errorf("%s: %w", spec.Argv[0], err)
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	defer stop()
	fail := func(format string, a ...any) (*RunResult, []arrival, error) {
		err := fmt.Errorf("%s %s (%s): %s", spec.Side, spec.Input, spec.Phase, fmt.Sprintf(format, a...))
		stop()
		return nil, nil, fmt.Errorf("%w\n--- %s (last lines) ---\n%s", err, spec.Log, tail(spec.Log, 25))
	}
	// sleep waits d; false when the side exited or the harness is stopped.
	var exitErr error
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case exitErr = <-exited:
			stopped = true
			return false
		case <-ctx.Done():
			return false
		}
	}

	deadline := time.Now().Add(spec.StartTimeout)
	var conn net.Conn
	for {
		conn, err = net.Dial("unix", spec.Socket)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail("no socket at %s after %s: %v", spec.Socket, spec.StartTimeout, err)
		}
		if !sleep(50 * time.Millisecond) {
			return fail("stopped before its socket appeared (%v)", exitOr(exitErr, ctx))
		}
	}
	defer conn.Close()

	var (
		mu       sync.Mutex
		all      []arrival
		bad      int
		badErr   error
		first    = make(chan struct{})
		readDone = make(chan struct{})
	)
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 64<<10), 2<<20)
		once := sync.Once{}
		for sc.Scan() {
			now := time.Now()
			r, err := parseRecord(sc.Bytes())
			mu.Lock()
			if err != nil {
				bad++
				badErr = err
			} else {
				all = append(all, arrival{at: now, rec: r})
			}
			mu.Unlock()
			if err == nil && r.Type == "result" {
				once.Do(func() { close(first) })
			}
		}
	}()
	select {
	case <-first:
	case exitErr = <-exited:
		stopped = true
		return fail("exited before its first result (%v)", exitOr(exitErr, ctx))
	case <-readDone:
		return fail("closed the connection before its first result")
	case <-time.After(time.Until(deadline)):
		return fail("no result within %s", spec.StartTimeout)
	case <-ctx.Done():
		return fail("%v", ctx.Err())
	}
	if !sleep(spec.Warmup) {
		return fail("stopped during the warm-up (%v)", exitOr(exitErr, ctx))
	}

	pid := cmd.Process.Pid
	cpu0, err := readCPU(pid)
	if err != nil {
		return fail("%v", err)
	}
	t0 := time.Now()
	var rss []float64
	var rssErr error
	tick := time.NewTicker(100 * time.Millisecond)
	end := time.NewTimer(spec.Measure)
	for done := false; !done; {
		if r, _, err := readMem(pid); err == nil {
			rss = append(rss, float64(r)/1024)
		} else {
			rssErr = err
		}
		select {
		case <-tick.C:
		case <-end.C:
			done = true
		case exitErr = <-exited:
			stopped = true
			tick.Stop()
			return fail("exited during the measurement (%v)", exitOr(exitErr, ctx))
		case <-ctx.Done():
			tick.Stop()
			return fail("%v", ctx.Err())
		}
	}
	tick.Stop()
	t1 := time.Now()
	cpu1, err := readCPU(pid)
	if err != nil {
		return fail("%v", err)
	}
	_, hwm, err := readMem(pid)
	if err != nil {
		return fail("%v", err)
	}
	if len(rss) == 0 {
		return fail("no RSS sample: %v", rssErr)
	}
	stop()
	conn.Close()
	<-readDone

	mu.Lock()
	defer mu.Unlock()
	recs, lost := window(all, t0, t1)
	if len(recs) == 0 {
		return nil, all, fmt.Errorf("%s %s (%s): no results in the %s measurement window (see %s)", spec.Side, spec.Input, spec.Phase, spec.Measure, spec.Log)
	}
	res := &RunResult{
		Side: spec.Side, Input: spec.Input, Phase: spec.Phase, PaceFPS: spec.PaceFPS, Argv: spec.Argv, Log: spec.Log,
		WindowS: t1.Sub(t0).Seconds(), Results: len(recs), Lost: lost,
		CPUS:   float64(cpu1-cpu0) / userHZ,
		HWMMiB: float64(hwm) / 1024, Stages: stageDists(recs), BadLines: bad,
	}
	res.Throughput = float64(uint64(res.Results)+lost) / res.WindowS
	res.CPUPerFrMs = 1000 * res.CPUS / float64(uint64(res.Results)+lost)
	for _, v := range rss {
		res.RSSAvgMiB += v / float64(len(rss))
		res.RSSMaxMiB = max(res.RSSMaxMiB, v)
	}
	for _, a := range all {
		if a.rec.Event == "pyloop_info" {
			res.Info = a.rec.Info
		}
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "benchcmp: %s %s: %d unreadable lines, last: %v\n", spec.Side, spec.Input, bad, badErr)
	}
	return res, all, nil
}

func exitOr(err error, ctx context.Context) error {
	if err == nil {
		if err = ctx.Err(); err == nil {
			err = errors.New("exited")
		}
	}
	return err
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
