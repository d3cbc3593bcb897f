//go:build cgo && linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edged-dev/edged/sensors/h26x"
)

// baseline is one way of running ffmpeg on the same streams: N processes,
// each fed one stream through its stdin on the schedule nvdecbench's
// replay keeps, each writing one framecrc line a picture to its stdout.
type baseline struct {
	path    string        // the ffmpeg binary
	threads string        // its decoder's -threads; "auto" is ffmpeg's default
	hwaccel bool          // -hwaccel cuda -hwaccel_output_format cuda: NVDEC, pictures left on the GPU
	stagger time.Duration // between one process's first access unit and the next's
}

func (b baseline) name() string {
	n := "ffmpeg"
	if !b.hwaccel {
		n += "-cpu"
	}
	if b.threads != "auto" {
		n += "-t" + b.threads
	}
	return n
}

// args is the command line: the stream from stdin at fps (raw H.264 or
// H.265 has no timestamps), each decoded picture wrapped as is (no copy,
// no download from the GPU) and hashed by framecrc, one line flushed to
// stdout a picture, so the time a line arrives is the time ffmpeg is done
// with the picture. -probesize 32 (the least) starts decoding at the first
// access unit: by default ffmpeg reads 5 MB of a pipe before its first
// picture, which fed in real time is a start-up of minutes (it does not
// change the steady state measured).
func (b baseline) args(c h26x.Codec, fps float64) []string {
	a := []string{"-hide_banner", "-nostdin", "-loglevel", "warning"}
	if b.hwaccel {
		a = append(a, "-hwaccel", "cuda", "-hwaccel_output_format", "cuda")
	}
	if b.threads != "auto" {
		a = append(a, "-threads", b.threads)
	}
	f := "h264"
	if c == h26x.H265 {
		f = "hevc"
	}
	return append(a, "-f", f, "-framerate", strconv.FormatFloat(fps, 'g', -1, 64), "-probesize", "32", "-i", "pipe:0",
		"-map", "0:v:0", "-fps_mode", "passthrough", "-c:v", "wrapped_avframe",
		"-f", "framecrc", "-flush_packets", "1", "pipe:1")
}

// parseBaselines reads -ffmpeg-threads: a comma list of -threads values.
func parseBaselines(path, threads string, hwaccel bool, stagger time.Duration) ([]baseline, error) {
	if path == "" {
		return nil, nil
	}
	var bs []baseline
	for _, t := range strings.Split(threads, ",") {
		t = strings.TrimSpace(t)
		if n, err := strconv.Atoi(t); t != "auto" && (err != nil || n < 0) {
			return nil, fmt.Errorf("-ffmpeg-threads: %q is not auto or a number of threads", t)
		}
		bs = append(bs, baseline{path: path, threads: t, hwaccel: hwaccel, stagger: stagger})
	}
	return bs, nil
}

// delimiter is an access unit delimiter. Written after each access unit it
// ends the picture for ffmpeg's parser, which otherwise holds a picture
// until the next one's first bytes arrive (a period of latency nvdecbench's
// decoders, handed whole access units, do not have).
func delimiter(c h26x.Codec) []byte {
	if c == h26x.H265 {
		return []byte{0, 0, 0, 1, 0x46, 0x01, 0x50} // nal_unit_type 35, pic_type 2
	}
	return []byte{0, 0, 0, 1, 0x09, 0xf0} // nal_unit_type 9, primary_pic_type 7
}

// ffproc is one ffmpeg process and what it has put out.
type ffproc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr tail
	read   chan struct{} // closed when stdout is at its end

	mu  sync.Mutex
	out []time.Time // when each picture's line arrived
}

func startFFmpeg(b baseline, c h26x.Codec, fps float64, capacity int) (*ffproc, error) {
	p := &ffproc{read: make(chan struct{}), out: make([]time.Time, 0, capacity)}
	p.cmd = exec.Command(b.path, b.args(c, fps)...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Bytes(); len(line) > 0 && line[0] != '#' {
				t := time.Now()
				p.mu.Lock()
				p.out = append(p.out, t)
				p.mu.Unlock()
			}
		}
	}()
	return p, nil
}

func (p *ffproc) emitted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.out)
}

// cpu is the process's user and system time so far, all its threads
// (/proc/PID/stat; its clock ticks are USER_HZ, 100 a second on Linux).
func (p *ffproc) cpu() time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// stop closes stdin (ffmpeg drains and exits), waits up to wait and kills
// it after that; it returns the CPU time of the whole process, start-up
// included.
func (p *ffproc) stop(wait time.Duration) (time.Duration, error) {
	p.in.Close()
	select {
	case <-p.read:
	case <-time.After(wait):
		p.cmd.Process.Kill()
		<-p.read
	}
	err := p.cmd.Wait()
	var cpu time.Duration
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if err != nil {
		return cpu, fmt.Errorf("%w: %s", err, strings.TrimSpace(p.stderr.String()))
	}
	return cpu, nil
}

// feeding is one process's input: the time each picture written was due.
type feeding struct {
	sched   []time.Time // by write, which is by line of output
	dropped int
	err     error
}

// feed writes s's access units [from, …) on the schedule replay keeps,
// from start until end, dropping up to the next key when more than backlog
// pictures behind (a write blocks while ffmpeg does not read).
func feed(p *ffproc, aus [][]byte, key []bool, f *feeding, start, end time.Time, period time.Duration, backlog, from int) {
	i := from
	for t := start; t.Before(end); t = t.Add(period) {
		if now := time.Now(); now.Sub(t) > time.Duration(backlog)*period {
			for {
				i = (i + 1) % len(aus)
				t = t.Add(period)
				f.dropped++
				if key[i] && time.Since(t) <= period {
					break
				}
			}
		} else if w := time.Until(t); w > 0 {
			time.Sleep(w)
		}
		f.sched = append(f.sched, t)
		if _, err := p.in.Write(aus[i]); err != nil {
			f.err = fmt.Errorf("writing access unit %d: %w", i, err)
			return
		}
		i = (i + 1) % len(aus)
	}
}

// measureFFmpeg runs n ffmpeg processes of b for seconds, as measure does
// n NVDEC decoders, prints their row and returns it.
func measureFFmpeg(b baseline, s *stream, n int, period time.Duration, seconds float64, backlog int) (row, error) {
	fps := float64(time.Second) / float64(period)
	aus := make([][]byte, len(s.aus))
	for i, au := range s.aus {
		aus[i] = append(slices.Clip(au), delimiter(s.codec)...)
	}
	warm := warmup(s)
	capacity := warm + int(seconds*fps) + 64
	idle := gpuIdle(20 * time.Second)
	t0 := time.Now()
	procs := make([]*ffproc, 0, n)
	kill := func() {
		for _, p := range procs {
			p.cmd.Process.Kill()
			p.stop(time.Second)
		}
	}
	for range n {
		p, err := startFFmpeg(b, s.codec, fps, capacity)
		if err != nil {
			kill()
			return row{}, fmt.Errorf("%s, %d streams: %w", b.name(), n, err)
		}
		procs = append(procs, p)
	}
	// The warm-up, as the NVDEC side's: the first GOP as fast as each
	// process reads it (process start, CUDA, the decoder, stream probing),
	// until every process has put out pictures and stopped. ffmpeg makes
	// its CUDA context and decoder at the first access unit it reads, so
	// -ffmpeg-stagger spaces the processes' first ones.
	feeds := make([]feeding, n)
	var wg sync.WaitGroup
	for k, p := range procs {
		feeds[k].sched = make([]time.Time, warm, capacity)
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(k) * b.stagger)
			for i := range warm {
				if _, err := p.in.Write(aus[i]); err != nil {
					feeds[k].err = fmt.Errorf("warming up: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := settle(procs, feeds, 60*time.Second); err != nil {
		// how many failed, and what the others hold on the GPU
		time.Sleep(3 * time.Second)
		gone, mem := ended(procs), gpuMemory()
		kill()
		return row{}, fmt.Errorf("%s, %d streams: %d processes ended while warming up, GPU memory in use then %s MiB (before the processes: %s MiB); %w",
			b.name(), n, gone, mem, idle, err)
	}
	made := time.Since(t0)
	start := time.Now().Add(100 * time.Millisecond)
	end := start.Add(time.Duration(seconds * float64(time.Second)))
	time.Sleep(time.Until(start))
	cpu0, self0 := childCPU(procs), cpuTime()
	for k, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			feed(p, aus, s.key, &feeds[k], start.Add(period*time.Duration(k)/time.Duration(n)), end, period, backlog, warm)
		}()
	}
	wg.Wait()
	if d := time.Until(end); d > 0 {
		time.Sleep(d)
	}
	cpu, self := childCPU(procs)-cpu0, cpuTime()-self0
	wall := time.Since(start)
	r := row{name: b.name(), streams: n, warm: made, gpuMiB: gpuMemory()}
	var lat []time.Duration
	var errs []error
	var life time.Duration
	behind := 0
	for k, p := range procs {
		f := &feeds[k]
		p.mu.Lock()
		out := slices.Clone(p.out)
		p.mu.Unlock()
		d, l, late := tally(out, f.sched, warm, start, end)
		r.decoded, lat, behind = r.decoded+d, append(lat, l...), behind+late
		r.dropped += f.dropped
		c, err := p.stop(30 * time.Second)
		life += c
		if f.err != nil {
			err = errors.Join(f.err, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %d: %w", k, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return row{}, fmt.Errorf("%s, %d streams: %w", b.name(), n, err)
	}
	slices.Sort(lat)
	r.fill(cpu, wall, lat)
	r.print()
	fmt.Printf("#   %s: %d pictures written and not out by the end; this process %s ms CPU a picture feeding them; ffmpeg with its start-up: %.1f s CPU a process; GPU memory before the processes %s MiB\n",
		r.name, behind, ms(self/time.Duration(max(1, r.decoded))), life.Seconds()/float64(n), idle)
	return r, nil
}

// tally counts one process's pictures put out during the run [start, end]
// (as the NVDEC side counts them), the latency of those of them fed during
// it (from write warm on; out and sched are both by picture) and the
// pictures fed and not out by the end.
func tally(out, sched []time.Time, warm int, start, end time.Time) (decoded int, lat []time.Duration, behind int) {
	for j, t := range out {
		if t.Before(start) || t.After(end) {
			continue
		}
		decoded++
		if j >= warm && j < len(sched) {
			lat = append(lat, t.Sub(sched[j]))
		}
	}
	for j := warm; j < len(sched); j++ {
		if j >= len(out) || out[j].After(end) {
			behind++
		}
	}
	return decoded, lat, behind
}

// settle waits until every process has put out a picture and put out no
// more for a while (its decoder may hold pictures back until more arrive).
func settle(procs []*ffproc, feeds []feeding, limit time.Duration) error {
	const quiet = 300 * time.Millisecond
	deadline := time.Now().Add(limit)
	last := make([]int, len(procs))
	since := time.Now()
	for {
		for k, p := range procs {
			if feeds[k].err != nil {
				_, err := p.stop(time.Second)
				return fmt.Errorf("%w (ffmpeg: %w)", feeds[k].err, err)
			}
		}
		moved, silent := false, 0
		for k, p := range procs {
			e := p.emitted()
			if e != last[k] {
				last[k], moved = e, true
			}
			if e == 0 {
				silent++
			}
			select {
			case <-p.read:
				_, err := p.stop(time.Second)
				return fmt.Errorf("ffmpeg ended while warming up (%d pictures out): %w", e, err)
			default:
			}
		}
		if moved || silent > 0 {
			since = time.Now()
		}
		if time.Since(since) >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warming up: after %s %d of %d processes have put out no picture", limit, silent, len(procs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gpuMemory is the memory in use on the GPU as nvidia-smi reports it
// (every process's, in MiB), or "-" without nvidia-smi.
func gpuMemory() string {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		if smi, err = exec.LookPath("/usr/local/nvidia/bin/nvidia-smi"); err != nil {
			return "-"
		}
	}
	out, err := exec.Command(smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return "-"
	}
	return strings.TrimSpace(strings.Split(string(out), "\n")[0])
}

// ended is how many of procs have ended.
func ended(procs []*ffproc) int {
	n := 0
	for _, p := range procs {
		select {
		case <-p.read:
			n++
		default:
		}
	}
	return n
}

// gpuIdle waits, up to limit, until the GPU's memory in use stops falling
// (the driver frees an ended process's memory after it has gone) and
// returns it.
func gpuIdle(limit time.Duration) string {
	last, since := gpuMemory(), time.Now()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline) && time.Since(since) < time.Second; {
		time.Sleep(200 * time.Millisecond)
		if m := gpuMemory(); m != last {
			last, since = m, time.Now()
		}
	}
	return last
}

func childCPU(procs []*ffproc) time.Duration {
	var t time.Duration
	for _, p := range procs {
		t += p.cpu()
	}
	return t
}

// tail keeps the last 4 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 4096 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-4096:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
