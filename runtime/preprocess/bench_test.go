package preprocess

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
)

// BenchmarkPreprocess times the fast path (default threads and one
// thread) and the reference on noisy and flat frames:
//
//	go test -run '^$' -bench Preprocess -benchmem ./runtime/preprocess/
func BenchmarkPreprocess(b *testing.B) {
	yuyv := func(w, h int) sensors.Format { return sensors.Format{Width: w, Height: h, Pixel: sensors.YUYV} }
	for _, c := range []struct {
		name string
		f    sensors.Format
		o    Options
	}{
		{"1080p-3x224", yuyv(1920, 1080), Options{Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3, H: 224, W: 224}}},
		{"4K-3x640-letterbox-f16", yuyv(3840, 2160), Options{Resize: Letterbox, Out: Output{C: 3, H: 640, W: 640, Half: true}}},
		{"640x480-3x64", yuyv(640, 480), Options{Out: Output{C: 3, H: 64, W: 64}}},
		// rows shared by output rows (a mild downscale): the horizontal
		// pass, the row cache and the vertical pass instead of the fused one
		{"480p-3x416-letterbox", yuyv(640, 480), Options{Resize: Letterbox, Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3, H: 416, W: 416}}},
		{"1080p-3x224-area", yuyv(1920, 1080), Options{Filter: Area, Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3, H: 224, W: 224}}},
	} {
		for _, frame := range []string{"noisy", "flat"} {
			src := flat(c.f)
			if frame == "noisy" {
				src = noise(c.f, 1)
			}
			dst := make([]byte, c.o.Out.Bytes())
			for _, threads := range []int{0, 1} {
				o := c.o
				o.Threads = threads
				p, err := New(o)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("%s/%s/fast-t%d", c.name, frame, p.Options().Threads), func(b *testing.B) {
					if _, err := p.Run(src, c.f, dst); err != nil { // tables and workers
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.SetBytes(int64(len(src)))
					q := newQuantiles()
					for b.Loop() {
						t := time.Now()
						if _, err := p.Run(src, c.f, dst); err != nil {
							b.Fatal(err)
						}
						q.add(time.Since(t))
					}
					q.report(b)
				})
				p.Close()
			}
			b.Run(fmt.Sprintf("%s/%s/reference", c.name, frame), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(src)))
				q := newQuantiles()
				for b.Loop() {
					t := time.Now()
					if _, err := reference(src, c.f, c.o, dst); err != nil {
						b.Fatal(err)
					}
					q.add(time.Since(t))
				}
				q.report(b)
			})
		}
	}
}

// quantiles collects per-frame times (the benchmark machine is shared, so
// the median says more than the mean); its buffer is allocated before the
// timed loop so -benchmem counts the Run's allocations alone.
type quantiles struct{ t []time.Duration }

func newQuantiles() *quantiles { return &quantiles{t: make([]time.Duration, 0, 1<<16)} }

func (q *quantiles) add(d time.Duration) {
	if len(q.t) < cap(q.t) {
		q.t = append(q.t, d)
	}
}

// report adds p50-ns/op and p90-ns/op.
func (q *quantiles) report(b *testing.B) {
	if len(q.t) == 0 {
		return
	}
	slices.Sort(q.t)
	b.ReportMetric(float64(q.t[len(q.t)/2].Nanoseconds()), "p50-ns/op")
	b.ReportMetric(float64(q.t[len(q.t)*9/10].Nanoseconds()), "p90-ns/op")
}
