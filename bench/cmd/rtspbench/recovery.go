package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// recovery kills the server -n times, keeps it down for -down, starts it
// again and measures the time from its READY (listening) to the first
// frame the source delivers, with the source supervised as runtime's
// capture loop does (Start with backoff.Restart, Next, Close).
func recovery(args []string) error {
	fs := flag.NewFlagSet("recovery", flag.ExitOnError)
	file := fs.String("file", "", "Annex-B H.264 file to serve")
	gen := fs.String("gen", "", "folder to make the 1080p30 stream in with ffmpeg when -file is not given")
	addr := fs.String("addr", "127.0.0.1:8656", "server address")
	n := fs.Int("n", 20, "restarts")
	down := fs.Duration("down", 3*time.Second, "how long the server stays down")
	fs.Parse(args)
	f, err := streamFile(*file, *gen)
	if err != nil {
		return err
	}
	srv, err := startServer(f, *addr)
	if err != nil {
		return err
	}
	dec := func(c h26x.Codec, p []byte) (rtsp.Decoder, error) {
		d, err := avcodec.Open(c, avcodec.Options{Params: p})
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	src, err := rtsp.New(rtsp.Options{Name: "cam", URL: srv.URL, Decoder: dec})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	frames := make(chan int64, 64)
	done := make(chan struct{})
	go func() {
		rtsptest.Supervise(ctx, src, sensorstest.NewHeapPool(6, 1920*1088*3/2), func(f sensors.Frame) {
			f.Slot.Release()
			select {
			case frames <- sensors.Now():
			default:
			}
		})
		close(done)
	}()
	defer func() { cancel(); <-done; srv.kill() }()
	first := func(after int64, within time.Duration) (time.Duration, error) {
		deadline := time.After(within)
		for {
			select {
			case t := <-frames:
				if t >= after {
					return time.Duration(sensors.Now() - after), nil
				}
			case <-deadline:
				return 0, fmt.Errorf("no frame within %v", within)
			}
		}
	}
	if _, err := first(sensors.Now(), 30*time.Second); err != nil {
		return err
	}
	fmt.Printf("stream %s at %s; %d restarts, down %v each; load average %s at the start\n", f, srv.URL, *n, *down, loadavg())
	var took []time.Duration
	for i := 1; i <= *n; i++ {
		srv.kill()
		time.Sleep(*down)
		if srv, err = startServer(f, *addr); err != nil {
			return err
		}
		back := sensors.Now()
		d, err := first(back, 30*time.Second)
		if err != nil {
			return fmt.Errorf("restart %d: %w", i, err)
		}
		took = append(took, d)
		fmt.Printf("restart %2d: first frame %v after the server was back (load %s)\n", i, d.Round(time.Millisecond), loadavg())
	}
	slices.Sort(took)
	fmt.Printf("first frame after the server is back: p50 %v, p90 %v, max %v over %d restarts (backoff cap %v, GOP 1 s)\n",
		took[len(took)/2].Round(time.Millisecond), took[len(took)*9/10].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took), backoff.Restart.Max)
	return nil
}
