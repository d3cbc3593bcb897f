//go:build tensorrt && cgo && linux

package tensorrt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/edged-dev/edged/trt"
)

// TestFakeShareOneEngine: engines shared from one loaded plan are one
// ICudaEngine (deserialised once) with an execution context each, on a
// stream of its own with profile 0 selected there, tensors of their own
// shapes, inferring at the same time with their own results and nothing
// allocated; the engine they were shared from may close first, and the
// ICudaEngine is deleted after its last context (the fake aborts the
// process otherwise).
func TestFakeShareOneEngine(t *testing.T) {
	b, g := newBackend(t, Options{LogLevel: SeverityInfo})
	ctx := context.Background()
	first, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "shared", Alloc: cpuAlloc{}, Shapes: map[string][]int64{"x": {3, 4}}})
	if err != nil {
		t.Fatal(err)
	}
	engines := []trt.Engine{first}
	for _, rows := range []int64{1, 2, 8} {
		e, err := first.(trt.Sharer).Share(ctx, trt.LoadOptions{Name: "shared", Alloc: cpuAlloc{}, Shapes: map[string][]int64{"x": {rows, 4}}})
		if err != nil {
			t.Fatalf("Share (%d rows): %v", rows, err)
		}
		if got := e.Outputs()[0].Shape[0]; got != rows {
			t.Errorf("shared engine of %d rows has output %v", rows, e.Outputs()[0].TensorSpec)
		}
		if !trt.SameWeights(first, e) {
			t.Errorf("shared engine of %d rows reports other weights", rows)
		}
		engines = append(engines, e)
	}
	if _, err := first.(trt.Sharer).Share(ctx, trt.LoadOptions{Name: "shared", Alloc: cpuAlloc{}, Shapes: map[string][]int64{"x": {9, 4}}}); !errors.Is(err, trt.ErrSignature) {
		t.Errorf("a shape outside the profile: %v, want ErrSignature", err)
	}
	other, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "other", Alloc: cpuAlloc{}, Shapes: map[string][]int64{"x": {3, 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if trt.SameWeights(first, other) {
		t.Error("a plan loaded again reports the same weights")
	}
	other.Close()

	logs, _ := drain(b)
	joined := strings.Join(logs, "\n")
	if n := strings.Count(joined, "deserialized an engine"); n != 2 {
		t.Errorf("%d deserialisations for one plan shared four ways and one other load, want 2:\n%s", n, joined)
	}
	for _, e := range engines {
		h := e.(*Engine).stream.(*fakeStream).h
		if !strings.Contains(joined, fmt.Sprintf("setOptimizationProfileAsync(0) on stream %#x", h)) {
			t.Errorf("no profile 0 selected on stream %#x:\n%s", h, joined)
		}
	}

	// The engine the others were shared from goes first.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.(trt.Sharer).Share(ctx, trt.LoadOptions{Alloc: cpuAlloc{}}); !errors.Is(err, trt.ErrClosed) {
		t.Errorf("Share on a closed engine: %v, want ErrClosed", err)
	}
	engines = engines[1:]
	var wg sync.WaitGroup
	for k, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := e.Inputs()[0].Float32()
			for round := range 50 {
				for i := range x {
					x[i] = float32(100*k + round + i)
				}
				if err := e.Infer(ctx); err != nil {
					t.Error(err)
					return
				}
				y := e.Outputs()[0].Float32()
				for i := range y {
					if want := 2*float32(100*k+round+i) + 1; y[i] != want {
						t.Errorf("engine %d round %d: y[%d] = %v, want %v", k, round, i, y[i], want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := testing.AllocsPerRun(50, func() { engines[0].Infer(ctx) }); n != 0 {
		t.Errorf("Infer on a shared engine allocates %v times per call", n)
	}
	logs, _ = drain(b)
	if m := strings.Join(logs, "\n"); strings.Contains(m, "error") {
		t.Errorf("the fake reported errors:\n%s", m)
	}
	for _, e := range engines {
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if g.openStreams() != 0 {
		t.Errorf("%d streams left open", g.openStreams())
	}
}
