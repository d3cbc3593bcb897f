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
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edged-dev/edged/internal/procfs"
)

// record is what the bench reads of a result record (docs/PROTOCOL.md).
type record struct {
	Type     string `json:"type"`
	Pipeline string `json:"pipeline"`
	Source   string `json:"source"` // the camera, in a batched pipeline's records
	FrameSeq uint64 `json:"frame_seq"`
	Engine   struct {
		Batch int `json:"batch"`
	} `json:"engine"`
	Latency map[string]int64 `json:"latency_us"` // stage -> µs; "total" is their sum
	at      time.Time        // when the bench read it
}

// camera is the camera a result is for: its source, or the camera of its
// pipeline (pN reads camN).
func (r *record) camera() string {
	if r.Source != "" {
		return r.Source
	}
	return "cam" + strings.TrimPrefix(r.Pipeline, "p")
}

// timing of one run.
type timing struct {
	Warmup, Measure, Start time.Duration
}

// runResult is what one run of the daemon measured.
type runResult struct {
	Case       caseSpec           `json:"case"`
	Config     string             `json:"config"`
	Log        string             `json:"log"`
	WindowS    float64            `json:"window_s"`
	Results    int                `json:"results"`
	ResultsPS  float64            `json:"results_per_s"`
	Replaced   uint64             `json:"replaced"` // frames skipped by frame_seq (schedule latest) in the window
	CPUms      float64            `json:"cpu_ms_per_result"`
	RSS        int64              `json:"rss_bytes"` // median VmRSS over the window
	HWM        int64              `json:"hwm_bytes"`
	GPU        int64              `json:"gpu_bytes,omitempty"` // nvidia-smi's used_memory of the daemon half way through the window
	Round      int                `json:"round"`
	Cameras    map[string]camStat `json:"cameras"`
	MeanBatch  float64            `json:"mean_batch,omitempty"` // engine.batch over the window's results
	StalledAtS float64            `json:"stalled_at_s,omitempty"`
	Totals     map[string][]int64 `json:"totals_us"`         // latency_us.total per camera, in the window
	Stages     map[string]float64 `json:"stage_mean_us"`     // latency_us's mean per stage over the window's results
	Profile    string             `json:"profile,omitempty"` // perf report of the window (saturation at the largest N), by DSO and by symbol
}

// camStat is one camera's part of a run.
type camStat struct {
	Results int     `json:"results"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
	LastS   float64 `json:"last_s"` // its last result, seconds after the window opened (negative: before)
}

// measure runs the daemon on cfgPath, waits for a result from every
// camera, discards warmup, measures, stops it.
// perf, when not "", profiles the window with perf record into
// logPath's .perf.data.
// nvidiaSMI, when not "", reads the daemon's GPU memory half way through.
func measure(ctx context.Context, edged, cfgPath, sock, logPath string, c caseSpec, tm timing, perf, nvidiaSMI string) (*runResult, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	argv := []string{edged, "run", "-config", cfgPath}
	fmt.Fprintf(logf, "# %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // the daemon must not outlive the bench
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", edged, err)
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
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	defer stop()
	fail := func(format string, a ...any) (*runResult, error) {
		stop()
		return nil, fmt.Errorf("%s: %s\n--- %s (last lines) ---\n%s", c.name(), fmt.Sprintf(format, a...), logPath, tail(logPath, 20))
	}
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case err := <-exited:
			stopped = true
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("edged exited: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	deadline := time.Now().Add(tm.Start)
	var conn net.Conn
	for {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail("no socket at %s after %s: %v", sock, tm.Start, err)
		}
		if err := wait(50 * time.Millisecond); err != nil {
			return fail("before its socket appeared: %v", err)
		}
	}
	defer conn.Close()
	var (
		mu       sync.Mutex
		all      []record
		bad      int
		readDone = make(chan struct{})
	)
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var r record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				mu.Lock()
				bad++
				mu.Unlock()
				continue
			}
			if r.Type != "result" {
				continue
			}
			r.at = time.Now()
			mu.Lock()
			all = append(all, r)
			mu.Unlock()
		}
	}()
	// Every camera's first result (the stalled one's too: it plays at its
	// pace until its stall).
	for {
		mu.Lock()
		seen := map[string]bool{}
		for i := range all {
			seen[all[i].camera()] = true
		}
		mu.Unlock()
		if len(seen) >= c.N {
			break
		}
		if time.Now().After(deadline) {
			return fail("results from %d of %d cameras after %s", len(seen), c.N, tm.Start)
		}
		if err := wait(50 * time.Millisecond); err != nil {
			return fail("before every camera had a result: %v", err)
		}
	}
	if err := wait(tm.Warmup); err != nil {
		return fail("during the warm-up: %v", err)
	}
	pid := cmd.Process.Pid
	cpu0, err := procfs.ReadCPU(pid)
	if err != nil {
		return fail("%v", err)
	}
	prof, err := startProfile(perf, strings.TrimSuffix(logPath, ".log")+".perf.data", pid)
	if err != nil {
		return fail("%v", err)
	}
	t0 := time.Now()
	var rss []int64
	var gpu int64
	gpuAt := t0.Add(tm.Measure / 2)
	for end := t0.Add(tm.Measure); time.Now().Before(end); {
		if nvidiaSMI != "" && !gpuAt.IsZero() && time.Now().After(gpuAt) {
			gpuAt = time.Time{}
			if gpu, err = gpuMemory(nvidiaSMI, pid); err != nil {
				fmt.Fprintf(os.Stderr, "batchbench: %s: %v\n", c.name(), err)
			}
		}
		m, err := procfs.ReadMem(pid)
		if err != nil {
			return fail("%v", err)
		}
		rss = append(rss, m.RSSBytes())
		if err := wait(100 * time.Millisecond); err != nil {
			prof.stop()
			return fail("during the measurement: %v", err)
		}
	}
	t1 := time.Now()
	profile := prof.stop()
	cpu1, err := procfs.ReadCPU(pid)
	if err != nil {
		return fail("%v", err)
	}
	m, err := procfs.ReadMem(pid)
	if err != nil {
		return fail("%v", err)
	}
	stop()
	conn.Close()
	<-readDone
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "batchbench: %s: %d unreadable lines\n", c.name(), bad)
	}
	slices.Sort(rss)
	r := &runResult{Case: c, Config: cfgPath, Log: logPath, WindowS: t1.Sub(t0).Seconds(), RSS: rss[len(rss)/2], HWM: int64(m.HWM) << 10, Profile: profile, GPU: gpu}
	r.summarise(all, t0, t1)
	if r.Results == 0 {
		return nil, fmt.Errorf("%s: no results in the measurement window (see %s)", c.name(), logPath)
	}
	r.CPUms = float64(cpu1-cpu0) * 1000 / procfs.UserHZ / float64(r.Results)
	return r, nil
}

// summarise computes the window's statistics from every record read.
func (r *runResult) summarise(all []record, t0, t1 time.Time) {
	r.Cameras, r.Totals, r.Stages = map[string]camStat{}, map[string][]int64{}, map[string]float64{}
	last := map[string]uint64{}
	lastAt := map[string]time.Time{}
	batches := 0
	for i := range all {
		rec := &all[i]
		cam := rec.camera()
		prev, seen := last[cam]
		last[cam], lastAt[cam] = rec.FrameSeq, rec.at
		if rec.at.Before(t0) || rec.at.After(t1) {
			continue
		}
		if seen && rec.FrameSeq > prev+1 {
			r.Replaced += rec.FrameSeq - prev - 1
		}
		r.Results++
		r.Totals[cam] = append(r.Totals[cam], rec.Latency["total"])
		for k, v := range rec.Latency {
			r.Stages[k] += float64(v)
		}
		batches += max(rec.Engine.Batch, 1)
	}
	r.ResultsPS = float64(r.Results) / r.WindowS
	if r.Results > 0 {
		r.MeanBatch = float64(batches) / float64(r.Results)
		for k := range r.Stages {
			r.Stages[k] /= float64(r.Results)
		}
	}
	for cam, at := range lastAt {
		ts := r.Totals[cam]
		r.Cameras[cam] = camStat{Results: len(ts), P50us: percentile(ts, 50), P99us: percentile(ts, 99), LastS: at.Sub(t0).Seconds()}
	}
}

// pooled is the percentile p of the totals of the cameras keep admits.
func (r *runResult) pooled(p float64, keep func(cam string) bool) float64 {
	var ts []int64
	for cam, v := range r.Totals {
		if keep(cam) {
			ts = append(ts, v...)
		}
	}
	return percentile(ts, p)
}

// percentile is the p-th percentile (nearest rank) of v in µs; NaN when
// v is empty.
func percentile(v []int64, p float64) float64 {
	if len(v) == 0 {
		return nan
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(p/100*float64(len(s))+0.999999) - 1
	return float64(s[min(max(k, 0), len(s)-1)])
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
