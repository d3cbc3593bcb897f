package reload_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/trttest"

	"github.com/edged-dev/edged/internal/procfs"
)

// benchReloader is a Reloader over a file the benchmark rewrites between
// iterations; Load then runs the whole transaction (read, hash, budget,
// load, signature, warm-up, install) without the debounce.
func benchReloader(b *testing.B, be trt.Backend) (*reload.Reloader, *trt.Hot, string) {
	dir := b.TempDir()
	path := filepath.Join(dir, "model.onnx")
	hot := &trt.Hot{}
	r, err := reload.New(reload.Options{Path: path, Backend: be, Targets: []reload.Target{{Hot: hot}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		r.Close()
		hot.Close()
	})
	return r, hot, path
}

func benchTransaction(b *testing.B, be trt.Backend, versions [][]byte) {
	r, hot, path := benchReloader(b, be)
	ctx := context.Background()
	b.ReportAllocs()
	// Warm up (first loads grow allocator arenas), then watch RSS.
	for j := range 20 {
		os.WriteFile(path, versions[j%len(versions)], 0o644)
		if err := r.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	rss0 := rssKiB()
	i := 20
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(path, versions[i%len(versions)], 0o644); err != nil {
			b.Fatal(err)
		}
		i++
		b.StartTimer()
		if err := r.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if g := hot.Current(); g == nil || g.Number != uint64(i) {
		b.Fatalf("%d transactions, generation %v", i, g)
	}
	runtime.GC()
	b.ReportMetric(float64(rssKiB()-rss0), "rss-growth-KiB")
	b.ReportMetric(float64(i-20), "reloads")
}

// rssKiB is the process's resident set size from /proc/self/status (0
// where there is none).
func rssKiB() int64 {
	m, _ := procfs.ReadMem(0)
	return int64(m.RSS)
}

// BenchmarkReloadTransaction measures one reload transaction (the
// debounce and settle intervals excluded).
func BenchmarkReloadTransaction(b *testing.B) {
	b.Run("fake", func(b *testing.B) {
		benchTransaction(b, trttest.NewBackend(), [][]byte{model(1), model(2)})
	})
	b.Run("onnx-demo", func(b *testing.B) {
		be := ortBackend(b)
		v1, _ := demomodel.Variant(1)
		v2, _ := demomodel.Variant(2)
		benchTransaction(b, be, [][]byte{v1, v2})
	})
}

// BenchmarkReloadCycle measures file replace to installed engine through
// fsnotify, with 1 ms debounce and settle (the defaults add 350 ms).
func BenchmarkReloadCycle(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "model.onnx")
	hot := &trt.Hot{}
	events := make(chan reload.Event, 16)
	r, err := reload.New(reload.Options{
		Path: path, Backend: trttest.NewBackend(), Targets: []reload.Target{{Hot: hot}},
		Debounce: time.Millisecond, Settle: time.Millisecond, Rescan: -1,
		OnEvent: func(ev reload.Event) { events <- ev },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer hot.Close()
	defer r.Close()
	if err := os.WriteFile(path, model(0), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := r.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	r.Start()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := os.WriteFile(path+".tmp", model(float32(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			b.Fatal(err)
		}
		for ev := range events {
			if ev.Outcome == reload.OutcomeReloaded {
				break
			}
			b.Fatalf("event %v", ev)
		}
	}
}

// BenchmarkInferDuringReload reports inference latency percentiles on the
// demo model with ONNX Runtime, steady and while the model is reloaded
// back to back by another goroutine (the swap itself is one atomic
// pointer store; what shows here is the CPU the staging takes).
func BenchmarkInferDuringReload(b *testing.B) {
	be := ortBackend(b)
	for _, reloading := range []bool{false, true} {
		name := "steady"
		if reloading {
			name = "reloading"
		}
		b.Run(name, func(b *testing.B) {
			r, hot, path := benchReloader(b, be)
			v0, _ := demomodel.Variant(0)
			v1, _ := demomodel.Variant(1)
			if err := os.WriteFile(path, v0, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := r.Load(context.Background()); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			reloads := 0
			if reloading {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 1; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						os.WriteFile(path, [][]byte{v0, v1}[i%2], 0o644)
						if r.Load(context.Background()) == nil {
							reloads++
						}
					}
				}()
			}
			ctx := context.Background()
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				g := hot.Acquire()
				if err := g.Engine.Infer(ctx); err != nil {
					b.Fatal(err)
				}
				g.Release()
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(t0))
				}
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			if reloading {
				b.ReportMetric(float64(reloads), "reloads")
			}
		})
	}
}
