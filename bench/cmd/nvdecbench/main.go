//go:build cgo && linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/nvdec"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
)

func main() {
	file := flag.String("file", "h264_1080p30_gop30.h264", "Annex-B H.264 (.h264) or H.265 (.h265) file")
	list := flag.String("streams", "1,2,4,8,16,24,32,48,64,96,128", "stream counts, in order; stops after the first that drops")
	fps := flag.Float64("fps", 30, "pictures a second per stream")
	seconds := flag.Float64("seconds", 10, "length of each run")
	backlog := flag.Int("backlog", 32, "pictures a stream may fall behind before it drops to its next key")
	unpaced := flag.Int("unpaced", 900, "pictures of one stream decoded as fast as possible first (0: none)")
	device := flag.Int("device", 0, "CUDA device")
	all := flag.Bool("all", false, "run every count in -streams, also after one dropped")
	useNVDEC := flag.Bool("nvdec", true, "measure sensors/nvdec (false: only the ffmpeg baseline)")
	ffmpeg := flag.String("ffmpeg", "", "an ffmpeg binary: after NVDEC, the same N streams each decoded by one ffmpeg process fed on the same schedule (empty: none)")
	threads := flag.String("ffmpeg-threads", "auto", "the ffmpeg decoder's -threads, a comma list: one baseline row each")
	hwaccel := flag.Bool("ffmpeg-hwaccel", true, "ffmpeg decodes with -hwaccel cuda -hwaccel_output_format cuda (false: on the CPU)")
	stagger := flag.Duration("ffmpeg-stagger", 0, "time between one ffmpeg process's first access unit and the next's (it makes its CUDA context then)")
	flag.Parse()
	bs, err := parseBaselines(*ffmpeg, *threads, *hwaccel, *stagger)
	if err == nil {
		err = run(config{*file, *list, *fps, *seconds, *backlog, *unpaced, *device, *all, *useNVDEC, bs})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nvdecbench:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	file, list       string
	fps, seconds     float64
	backlog, unpaced int
	device           int
	all, nvdec       bool
	baselines        []baseline
}

// stream is what every decoder replays.
type stream struct {
	codec h26x.Codec
	aus   [][]byte
	key   []bool // a random access point (IDR, CRA, BLA)
}

func load(file string) (*stream, error) {
	c := h26x.H264
	switch filepath.Ext(file) {
	case ".h265", ".hevc":
		c = h26x.H265
	case ".h264":
	default:
		return nil, fmt.Errorf("%s: want a .h264 or .h265 file", file)
	}
	aus, err := rtsptest.ReadAccessUnits(file, c)
	if err != nil {
		return nil, err
	}
	s := &stream{codec: c, aus: aus, key: make([]bool, len(aus))}
	for i, au := range aus {
		h26x.SplitAnnexB(au, func(nal []byte) bool {
			t := c.NALType(nal)
			if (c == h26x.H264 && t == 5) || (c == h26x.H265 && t >= 16 && t <= 21) {
				s.key[i] = true
			}
			return true
		})
	}
	if len(aus) == 0 || !s.key[0] {
		return nil, fmt.Errorf("%s: does not start with a key picture", file)
	}
	return s, nil
}

// gpuBuffer is one stream's frame buffer in device memory.
type gpuBuffer struct {
	drv *cuda.Driver
	ctx uintptr
	ptr uintptr
	n   int
}

func newBuffer(drv *cuda.Driver, ctx uintptr, n int) (*gpuBuffer, error) {
	p, r := drv.MemAlloc(ctx, n)
	if r != cuda.Success {
		return nil, fmt.Errorf("cuMemAlloc(%d): %w", n, r)
	}
	return &gpuBuffer{drv: drv, ctx: ctx, ptr: p, n: n}, nil
}

func (b *gpuBuffer) free() { b.drv.MemFree(b.ctx, b.ptr) }

// result is one stream's run.
type result struct {
	decoded, dropped int
	latency          []time.Duration
	err              error
}

// replay decodes s at fps until end, as a camera delivering it would.
func replay(s *stream, d *nvdec.Decoder, buf *gpuBuffer, start, end time.Time, period time.Duration, backlog, from int) result {
	var res result
	sched := make([]time.Time, 256)
	i, id := from, uint64(from)
	for t := start; t.Before(end); t = t.Add(period) {
		if now := time.Now(); now.Sub(t) > time.Duration(backlog)*period {
			// overrun: drop up to the next key whose time has come
			for {
				i = (i + 1) % len(s.aus)
				t = t.Add(period)
				res.dropped++
				if s.key[i] && time.Since(t) <= period {
					break
				}
			}
		} else if w := time.Until(t); w > 0 {
			time.Sleep(w)
		}
		sched[id%uint64(len(sched))] = t
		if err := d.Send(s.aus[i], id); err != nil {
			res.err = fmt.Errorf("access unit %d: %w", i, err)
			return res
		}
		i = (i + 1) % len(s.aus)
		id++
		for {
			pid, _, ok, err := d.Receive()
			if err != nil {
				res.err = err
				return res
			}
			if !ok {
				break
			}
			if _, err := d.WriteDevice(buf.ptr, buf.n); err != nil {
				res.err = err
				return res
			}
			res.decoded++
			res.latency = append(res.latency, time.Since(sched[pid%uint64(len(sched))]))
		}
	}
	return res
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

func run(c config) error {
	s, err := load(c.file)
	if err != nil {
		return err
	}
	var nv *gpu
	if c.nvdec {
		if nv, err = openGPU(c.device); err != nil {
			return err
		}
		defer nv.close()
	}
	fmt.Printf("# GPU memory in use before: %s MiB\n", gpuMemory())
	fmt.Printf("# %s: %s, %d access units, replayed at %g fps, %g s a run, backlog %d\n", filepath.Base(c.file), s.codec, len(s.aus), c.fps, c.seconds, c.backlog)
	for _, b := range c.baselines {
		fmt.Printf("# %s: %s %s\n", b.name(), b.path, strings.Join(b.args(s.codec, c.fps), " "))
	}
	if nv != nil && c.unpaced > 0 {
		if err := throughput(s, nv.drv, nv.ctx, c.device, c.unpaced, slot); err != nil {
			return err
		}
	}
	printHeader()
	period := time.Duration(float64(time.Second) / c.fps)
	for _, f := range strings.Split(c.list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-streams: %q", f)
		}
		dropped := 0
		var ref *row
		if nv != nil {
			r, err := measure(s, nv.drv, nv.ctx, c.device, n, slot, period, c.seconds, c.backlog)
			if err != nil {
				return err
			}
			ref, dropped = &r, r.dropped
		}
		for _, b := range c.baselines {
			r, err := measureFFmpeg(b, s, n, period, c.seconds, c.backlog)
			if err != nil {
				// the baseline failing (out of GPU memory with many
				// processes, say) ends neither the run nor NVDEC's rows
				fmt.Printf("# %v\n", err)
				continue
			}
			if ref != nil {
				ratios(r, *ref)
			} else {
				dropped = max(dropped, r.dropped)
			}
		}
		if dropped > 0 && !c.all {
			fmt.Printf("# %d streams dropped pictures: the last count that kept up is the one above it\n", n)
			break
		}
	}
	return nil
}

// slot is each stream's frame buffer: the largest picture NVDEC makes.
const slot = 4096 * 2304 * 3 / 2

// gpu is the device the NVDEC side decodes on.
type gpu struct {
	drv *cuda.Driver
	dev int
	ctx uintptr
}

func openGPU(device int) (*gpu, error) {
	name, h264, h265, err := nvdec.Probe("", device)
	if err != nil {
		return nil, err
	}
	drv, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	ver, _ := drv.Version()
	dev, _ := drv.DeviceGet(device)
	ctx, r := drv.PrimaryCtxRetain(dev)
	if r != cuda.Success {
		return nil, r
	}
	fmt.Printf("# %s, CUDA driver %d.%d; NVDEC H.264 %+v, H.265 %+v\n", name, ver/1000, ver%1000/10, h264, h265)
	return &gpu{drv: drv, dev: dev, ctx: ctx}, nil
}

func (g *gpu) close() { g.drv.PrimaryCtxRelease(g.dev) }

// row is one line of the table: n streams decoded one way.
type row struct {
	name                   string
	streams                int
	decoded, dropped       int
	fps, perStream         float64 // pictures a second; % of a core a stream
	perPic, p50, p99, pmax time.Duration
	warm                   time.Duration
	gpuMiB                 string // the GPU's memory in use at the end of the run
}

// fill derives the rates from the CPU time and wall time of the run and
// the sorted latencies of the pictures decoded.
func (r *row) fill(cpu, wall time.Duration, lat []time.Duration) {
	r.fps = float64(r.decoded) / wall.Seconds()
	r.perStream = float64(cpu) / float64(r.streams) / float64(wall) * 100
	if r.decoded > 0 {
		r.perPic = cpu / time.Duration(r.decoded)
	}
	r.p50, r.p99, r.pmax = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
}

func printHeader() {
	fmt.Printf("%-13s %7s %8s %8s %7s %11s %12s %8s %8s %8s %8s %8s\n", "decoder", "streams", "decoded", "dropped", "fps", "cpu/stream", "cpu/picture", "p50 ms", "p99 ms", "max ms", "warm-up", "GPU MiB")
}

func (r row) print() {
	fmt.Printf("%-13s %7d %8d %8d %7.1f %10.1f%% %12s %8s %8s %8s %8s %8s\n", r.name, r.streams, r.decoded, r.dropped, r.fps,
		r.perStream, ms(r.perPic)+"ms", ms(r.p50), ms(r.p99), ms(r.pmax), r.warm.Round(time.Millisecond), r.gpuMiB)
}

// ratios prints baseline b against NVDEC's row e from the same run.
func ratios(b, e row) {
	x := func(a, c time.Duration) string {
		if c == 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(a)/float64(c), 'f', 2, 64) + "x"
	}
	fmt.Printf("#   %s / nvdec at %d streams: CPU a picture %s, p50 %s, p99 %s; pictures %d / %d, dropped %d / %d\n",
		b.name, e.streams, x(b.perPic, e.perPic), x(b.p50, e.p50), x(b.p99, e.p99), b.decoded, e.decoded, b.dropped, e.dropped)
}

// measure runs n streams for seconds, prints their row and returns it.
func measure(s *stream, drv *cuda.Driver, ctx uintptr, device, n, slot int, period time.Duration, seconds float64, backlog int) (row, error) {
	decs := make([]*nvdec.Decoder, 0, n)
	bufs := make([]*gpuBuffer, 0, n)
	cleanup := func() {
		for _, d := range decs {
			d.Close()
		}
		for _, b := range bufs {
			b.free()
		}
	}
	for range n {
		d, err := nvdec.Open(s.codec, nvdec.Options{Device: device})
		if err != nil {
			cleanup()
			return row{}, fmt.Errorf("%d streams: %w", n, err)
		}
		decs = append(decs, d)
		b, err := newBuffer(drv, ctx, slot)
		if err != nil {
			cleanup()
			return row{}, fmt.Errorf("%d streams: %w", n, err)
		}
		bufs = append(bufs, b)
	}
	// Each decoder first decodes the stream's first GOP as fast as it
	// can: the decoder is made at the first SPS (cuvidCreateDecoder,
	// which the driver serialises: many at once take long), and that
	// is a camera's connect, not its steady state.
	warm := warmup(s)
	t0 := time.Now()
	var werr error
	var wmu sync.Mutex
	var wg0 sync.WaitGroup
	for k := range n {
		wg0.Add(1)
		go func() {
			defer wg0.Done()
			if err := preroll(s, decs[k], bufs[k], warm); err != nil {
				wmu.Lock()
				werr = err
				wmu.Unlock()
			}
		}()
	}
	wg0.Wait()
	if werr != nil {
		cleanup()
		return row{}, fmt.Errorf("%d streams: warming up: %w", n, werr)
	}
	made := time.Since(t0)
	start := time.Now().Add(100 * time.Millisecond)
	end := start.Add(time.Duration(seconds * float64(time.Second)))
	cpu0 := cpuTime()
	res := make([]result, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// streams start spread over one period, as cameras do
			res[k] = replay(s, decs[k], bufs[k], start.Add(period*time.Duration(k)/time.Duration(n)), end, period, backlog, warm)
		}()
	}
	wg.Wait()
	cpu := cpuTime() - cpu0
	wall := time.Since(start)
	mem := gpuMemory()
	cleanup()
	var lat []time.Duration
	decoded, dropped := 0, 0
	var errs []error
	for _, r := range res {
		decoded += r.decoded
		dropped += r.dropped
		lat = append(lat, r.latency...)
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return row{}, fmt.Errorf("%d streams: %w", n, err)
	}
	slices.Sort(lat)
	r := row{name: "nvdec", streams: n, decoded: decoded, dropped: dropped, warm: made, gpuMiB: mem}
	r.fill(cpu, wall, lat)
	r.print()
	return r, nil
}

// warmup is where the timed replay starts: the stream's second key
// picture (its first GOP is the warm-up), or 0.
func warmup(s *stream) int {
	for i := 1; i < len(s.aus); i++ {
		if s.key[i] {
			return i
		}
	}
	return 0
}

// preroll decodes access units [0, n) as fast as it can.
func preroll(s *stream, d *nvdec.Decoder, b *gpuBuffer, n int) error {
	for i := range n {
		if err := d.Send(s.aus[i], uint64(i)); err != nil {
			return err
		}
		for {
			_, _, ok, err := d.Receive()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if _, err := d.WriteDevice(b.ptr, b.n); err != nil {
				return err
			}
		}
	}
	return nil
}

// throughput decodes n pictures of one stream as fast as it can.
func throughput(s *stream, drv *cuda.Driver, ctx uintptr, device, n, slot int) error {
	d, err := nvdec.Open(s.codec, nvdec.Options{Device: device})
	if err != nil {
		return err
	}
	defer d.Close()
	b, err := newBuffer(drv, ctx, slot)
	if err != nil {
		return err
	}
	defer b.free()
	cpu0, t0 := cpuTime(), time.Now()
	done := 0
	for i := 0; done < n; i++ {
		if err := d.Send(s.aus[i%len(s.aus)], uint64(i)); err != nil {
			return err
		}
		for {
			_, _, ok, err := d.Receive()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if _, err := d.WriteDevice(b.ptr, b.n); err != nil {
				return err
			}
			done++
		}
	}
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	fmt.Printf("# one stream unpaced: %d pictures in %s: %.0f pictures/s, %s ms CPU a picture (%s)\n", done, wall.Round(time.Millisecond),
		float64(done)/wall.Seconds(), ms(cpu/time.Duration(done)), d.Describe())
	return nil
}
