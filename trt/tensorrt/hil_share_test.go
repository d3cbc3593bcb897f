//go:build hil && tensorrt

package tensorrt

import (
	"context"
	"sync"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
)

// TestHILShareEngine: four engines on one deserialised ICudaEngine (the
// engine and three execution contexts shared from it), each on its own
// stream with its own managed tensors, infer the demo scenes at the same
// time and each gets the class of its own frame; the device memory the
// contexts hold is each one's activation memory only.
func TestHILShareEngine(t *testing.T) {
	h := setupHIL(t)
	variant := envInt(t, "EDGED_HIL_VARIANT", 0)
	first := h.load(t, h.b, readEnvFile(t, "EDGED_HIL_TRT_ENGINE"), "trt")
	engines := []trt.Engine{first}
	for range 3 {
		e, err := first.(trt.Sharer).Share(context.Background(), trt.LoadOptions{Name: "trt", Alloc: h.alloc})
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	defer func() {
		for _, e := range engines {
			e.Close()
		}
	}()
	for i, e := range engines {
		t.Logf("engine %d: activation memory %d bytes, weights %v", i, e.(*Engine).DeviceMemory(), trt.SameWeights(first, e))
	}
	var wg sync.WaitGroup
	for k, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 64 {
				bg, err := frame(e, 4*i+k)
				if err == nil {
					err = e.Infer(context.Background())
				}
				if err != nil {
					t.Error(err)
					return
				}
				if out := e.Outputs()[0]; out.Name == demomodel.ClassOutput {
					if c, want := argmax(out.Float32()), demomodel.Expected(bg, variant); c != want {
						t.Errorf("engine %d frame %d: class %d, want %d", k, i, c, want)
					}
				}
			}
		}()
	}
	wg.Wait()
}
