package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// clientResult is what rtspbench client prints: one line of key=value.
type clientResult struct {
	frames    []int // per stream, after the warm-up
	all       int   // every frame delivered since the first Start, all streams
	skipped   int
	overrun   uint64
	mallocs   float64       // Go heap allocations per frame, whole process (gortsplib's included)
	p50, p99  time.Duration // TReady − TCapture (the first packet's arrival: the server sends no reports)
	seconds   float64       // of measurement
	decoderID string
}

func (r clientResult) String() string {
	per := make([]string, len(r.frames))
	for i, n := range r.frames {
		per[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("RESULT frames=%s all=%d skipped=%d overrun=%d mallocs_per_frame=%.2f p50_us=%d p99_us=%d seconds=%.2f decoder=%q",
		strings.Join(per, ","), r.all, r.skipped, r.overrun, r.mallocs, r.p50.Microseconds(), r.p99.Microseconds(), r.seconds, r.decoderID)
}

// parseResult reads a RESULT line.
func parseResult(line string) (clientResult, error) {
	var r clientResult
	if !strings.HasPrefix(line, "RESULT ") {
		return r, fmt.Errorf("no RESULT: %q", line)
	}
	for _, kv := range strings.Fields(strings.TrimPrefix(line, "RESULT ")) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "frames":
			for _, n := range strings.Split(v, ",") {
				x, _ := strconv.Atoi(n)
				r.frames = append(r.frames, x)
			}
		case "skipped":
			r.skipped, _ = strconv.Atoi(v)
		case "all":
			r.all, _ = strconv.Atoi(v)
		case "overrun":
			r.overrun, _ = strconv.ParseUint(v, 10, 64)
		case "mallocs_per_frame":
			r.mallocs, _ = strconv.ParseFloat(v, 64)
		case "p50_us":
			x, _ := strconv.Atoi(v)
			r.p50 = time.Duration(x) * time.Microsecond
		case "p99_us":
			x, _ := strconv.Atoi(v)
			r.p99 = time.Duration(x) * time.Microsecond
		case "seconds":
			r.seconds, _ = strconv.ParseFloat(v, 64)
		}
	}
	return r, nil
}

// client plays -n streams of -url for -d (after -warm), each as the
// daemon would: its own source and decoder, frames into a pool, released
// at once.
func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	url := fs.String("url", "", "rtsp:// URL")
	n := fs.Int("n", 1, "streams")
	d := fs.Duration("d", 20*time.Second, "measured time")
	warm := fs.Duration("warm", 2*time.Second, "time before measuring")
	threads := fs.Int("threads", 0, "libavcodec threads (0: its choice)")
	threadType := fs.String("thread-type", avcodec.ThreadsFrameSlice, "frame+slice or slice")
	profile := fs.String("cpuprofile", "", "write a CPU profile here")
	write := fs.Bool("write", true, "write each picture into its slot (false: decode only, as ffmpeg -f null; for finding what the copy costs)")
	fs.Parse(args)
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	dec := func(c h26x.Codec, p []byte) (rtsp.Decoder, error) {
		d, err := avcodec.Open(c, avcodec.Options{Threads: *threads, ThreadType: *threadType, Params: p})
		if err != nil {
			return nil, err
		}
		if !*write {
			return noWrite{d}, nil
		}
		return d, nil
	}
	srcs := make([]*rtsp.Source, *n)
	for i := range srcs {
		s, err := rtsp.New(rtsp.Options{Name: fmt.Sprint("cam", i), URL: *url, Transport: rtsp.TransportTCP, Decoder: dec})
		if err != nil {
			return err
		}
		srcs[i] = s
	}
	res, err := play(srcs, *warm, *d)
	if err != nil {
		return err
	}
	fmt.Println(res)
	return nil
}

// play runs every source on its own goroutine (the daemon's capture
// loop), counting frames after warm for d.
func play(srcs []*rtsp.Source, warm, d time.Duration) (clientResult, error) {
	var res clientResult
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counting := make(chan struct{})
	var mu sync.Mutex
	var lat []time.Duration
	res.frames = make([]int, len(srcs))
	errs := make(chan error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		pool := sensorstest.NewHeapPool(6, 1920*1088*3/2)
		if err := s.Start(ctx, pool); err != nil {
			return res, err
		}
		res.decoderID = s.Describe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			for {
				f, err := s.Next(ctx)
				if errors.Is(err, sensors.ErrSkipped) {
					mu.Lock()
					res.skipped++
					mu.Unlock()
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				mu.Lock()
				res.all++
				select {
				case <-counting:
					res.frames[i]++
					lat = append(lat, time.Duration(f.TReady-f.TCapture))
				default:
				}
				mu.Unlock()
				f.Slot.Release()
			}
		}()
	}
	time.Sleep(warm)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	close(counting)
	select {
	case err := <-errs:
		return res, err
	case <-time.After(d):
	}
	mu.Lock()
	runtime.ReadMemStats(&m1)
	res.seconds = time.Since(t0).Seconds()
	frames := slices.Clone(res.frames)
	total := 0
	for _, f := range frames {
		total += f
	}
	res.mallocs = float64(m1.Mallocs-m0.Mallocs) / float64(max(total, 1))
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	mu.Unlock()
	cancel()
	wg.Wait()
	for _, s := range srcs {
		res.overrun += s.Stats().Depacketizer.Dropped[h26x.DropOverrun-1]
	}
	res.frames = frames
	return res, nil
}

// noWrite is a decoder whose pictures are not written anywhere.
type noWrite struct{ *avcodec.Decoder }

func (noWrite) Write([]byte) (bool, error) { return false, nil }
