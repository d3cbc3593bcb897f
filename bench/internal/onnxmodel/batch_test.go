package onnxmodel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/onnx"
)

// BenchmarkBatchedInference is what batching buys ONNX Runtime on the CPU
// for the benchmark classifier: per frame, N inferences of one frame (the
// model with batch 1) against one inference of N frames (the model with a
// dynamic batch, loaded at N), timed alternately in the same run; threads
// is ONNX Runtime's intra-op thread count. size=8 is the same graph on an
// 8x8 input, where the convolutions cost almost nothing: its time per
// inference is what ONNX Runtime's Run costs around the work, the most a
// batch of N can save per frame is (N-1)/N of it. hidden=4096 adds the
// 16 MiB hidden layer (Options.Hidden): at batch 1 its Gemm reads every
// weight once per frame, at batch N once per N frames.
//
//	EDGED_ONNXRUNTIME_LIB=... go test -run '^$' -bench BatchedInference -benchtime 20x ./bench/internal/onnxmodel/
func BenchmarkBatchedInference(b *testing.B) {
	be, err := onnx.New(onnx.Options{})
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_ORT") == "1" || !errors.Is(err, trt.ErrBackend) {
			b.Fatal(err)
		}
		b.Skipf("no ONNX Runtime: %v", err)
	}
	ctx := context.Background()
	for _, m := range []struct{ size, hidden int }{{Size, 0}, {8, 0}, {Size, 4096}} {
		size := m.size
		one, err := Build(Options{Size: size, Hidden: m.hidden})
		if err != nil {
			b.Fatal(err)
		}
		dyn, err := Build(Options{Size: size, DynamicBatch: true, Hidden: m.hidden})
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("size=%d", size)
		if m.hidden > 0 {
			name += fmt.Sprintf("/hidden=%d", m.hidden)
		}
		for _, threads := range []int{1, 2} {
			for _, n := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("%s/threads=%d/N=%d", name, threads, n), func(b *testing.B) {
					single, err := be.Load(ctx, one, trt.LoadOptions{Name: "one", Threads: threads})
					if err != nil {
						b.Fatal(err)
					}
					defer single.Close()
					batched, err := be.Load(ctx, dyn, trt.LoadOptions{Name: "batched", Threads: threads,
						Shapes: map[string][]int64{InputName: {int64(n), 3, int64(size), int64(size)}}})
					if err != nil {
						b.Fatal(err)
					}
					defer batched.Close()
					if got := batched.Outputs()[0].Shape; got[0] != int64(n) {
						b.Fatalf("batched output %v", got)
					}
					for _, e := range []trt.Engine{single, batched} { // warm up
						if err := e.Infer(ctx); err != nil {
							b.Fatal(err)
						}
					}
					var unb, bat time.Duration
					b.ResetTimer()
					for range b.N {
						t0 := time.Now()
						for range n {
							if err := single.Infer(ctx); err != nil {
								b.Fatal(err)
							}
						}
						t1 := time.Now()
						if err := batched.Infer(ctx); err != nil {
							b.Fatal(err)
						}
						t2 := time.Now()
						unb += t1.Sub(t0)
						bat += t2.Sub(t1)
					}
					frames := float64(b.N * n)
					b.ReportMetric(float64(unb.Microseconds())/frames, "unbatched-µs/frame")
					b.ReportMetric(float64(bat.Microseconds())/frames, "batched-µs/frame")
					b.ReportMetric(float64(bat)/float64(unb), "batched/unbatched")
				})
			}
		}
	}
}
