//go:build cgo && linux

package onnx

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
)

// TestShareOneSession: engines shared from one session have tensors of
// their own (another batch size even, on a dynamic model), run at the same
// time with the right results for their own inputs (-race: nothing of one
// engine is written by another), allocate nothing per inference, and the
// session outlives the engine it was loaded with.
func TestShareOneSession(t *testing.T) {
	model := build(t, demomodel.Options{DynamicBatch: true})
	first, err := ortBackend(t).Load(context.Background(), model, trt.LoadOptions{Name: "shared", Image: &trt.ImageShape{Height: 64, Width: 64}})
	if err != nil {
		t.Fatal(err)
	}
	var engines []trt.Engine
	for i := range 3 {
		shape := []int64{int64(1 + i%2), 3, 64, 64}
		e, err := first.(trt.Sharer).Share(context.Background(), trt.LoadOptions{Shapes: map[string][]int64{"image": shape}})
		if err != nil {
			t.Fatalf("Share %d: %v", i, err)
		}
		t.Cleanup(func() { e.Close() })
		if !trt.SameWeights(first, e) {
			t.Fatalf("engine %d does not report the first engine's weights", i)
		}
		if e.Inputs()[0].Buf == first.Inputs()[0].Buf {
			t.Fatalf("engine %d shares the first engine's input tensor", i)
		}
		if got := e.Outputs()[0].Shape[0]; got != shape[0] {
			t.Fatalf("engine %d: output batch %d, want %d (shapes follow its own input)", i, got, shape[0])
		}
		engines = append(engines, e)
	}
	other := load(t, model, trt.LoadOptions{Image: &trt.ImageShape{Height: 64, Width: 64}})
	if trt.SameWeights(first, other) {
		t.Fatal("an engine loaded separately reports the same weights")
	}
	// The engine the session was loaded with goes first: the others keep
	// the session.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.(trt.Sharer).Share(context.Background(), trt.LoadOptions{}); !errors.Is(err, trt.ErrClosed) {
		t.Fatalf("Share on a closed engine = %v, want ErrClosed", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(engines))
	for i, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := e.Inputs()[0].Float32()
			n := int(e.Inputs()[0].Shape[0])
			plane := 3 * 64 * 64
			for round := range 20 {
				bg := (i + round) % demomodel.Classes
				for k := range n {
					if err := demomodel.Render(in[k*plane:(k+1)*plane], 64, bg, squares[1]); err != nil {
						errs <- err
						return
					}
				}
				if err := e.Infer(context.Background()); err != nil {
					errs <- err
					return
				}
				class := e.Outputs()[0].Float32()
				for k := range n {
					if got, want := demomodel.Argmax(class[k*8:(k+1)*8]), demomodel.Expected(bg, 0); got != want {
						t.Errorf("engine %d round %d item %d: class %d, want %d", i, round, k, got, want)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e := engines[0]
	allocs := testing.AllocsPerRun(100, func() { e.Infer(context.Background()) })
	if allocs != 0 {
		t.Errorf("Infer on a shared session allocates %v times per call, want 0", allocs)
	}
}
