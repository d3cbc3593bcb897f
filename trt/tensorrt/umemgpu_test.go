//go:build tensorrt && cgo && linux

package tensorrt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// TestUmemGPUWithFakeTensorRT wires the backend to a real CUDA device
// through UmemGPU, with the fake libnvinfer standing in for TensorRT (it
// reads and writes the tensors from the CPU, which managed and pinned memory
// allow). It runs only where a CUDA driver is present (the GPU machine) and
// shows the stream, worker and attach/detach wiring against the real umem,
// in strict mode (the Jetson rules). It skips elsewhere.
func TestUmemGPUWithFakeTensorRT(t *testing.T) {
	lib := fakeLibrary(t)
	dev, err := umem.OpenDevice(umem.DeviceOptions{Strict: true})
	if errors.Is(err, umem.ErrNoCUDA) {
		t.Skipf("no CUDA: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	w, err := dev.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b, err := New(Options{Library: lib, GPU: UmemGPU(dev, w), LogLevel: SeverityInfo})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	for _, kind := range []umem.Kind{umem.KindManaged, umem.KindPinned} {
		t.Run(kind.String(), func(t *testing.T) {
			alloc := dev.NewAllocator(umem.StrategyAuto, umem.MemOptions{Kind: kind})
			en, err := b.Load(context.Background(), fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "gpu", Alloc: alloc,
				Shapes: map[string][]int64{"x": {8, 4}}})
			if err != nil {
				t.Fatal(err)
			}
			defer en.Close()
			e := en.(*Engine)
			if us := UmemStream(e.Stream()); us == nil || us.Handle() != e.Stream().Handle() {
				t.Errorf("UmemStream(%v) = %v", e.Stream(), us)
			}
			x := e.Inputs()[0].Float32()
			if x == nil {
				t.Fatal("input not host-accessible before inference")
			}
			for i := range x {
				x[i] = float32(i)
			}
			before := dev.Stats()
			if err := e.Infer(context.Background()); err != nil {
				t.Fatal(err)
			}
			after := dev.Stats()
			if a, d := after.Attaches-before.Attaches, after.Detaches-before.Detaches; a != 2 || d != 2 {
				t.Errorf("one inference attached %d and detached %d buffers, want 2 and 2", a, d)
			}
			y := e.Outputs()[0].Float32()
			if y == nil {
				t.Fatal("output not host-accessible after inference")
			}
			for i := range y {
				if y[i] != 2*float32(i)+1 {
					t.Fatalf("y[%d] = %v, want %v", i, y[i], 2*float32(i)+1)
				}
			}
			logs, _ := drain(b)
			if want := fmt.Sprintf("enqueueV3 on stream %#x", e.stream.Handle()); !strings.Contains(strings.Join(logs, "\n"), want) {
				t.Errorf("log lacks %q: %v", want, logs)
			}
			if n := testing.AllocsPerRun(50, func() {
				if err := e.Infer(context.Background()); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("Infer through umem allocates %v times per call", n)
			}
		})
	}
}

// BenchmarkUmemFakeInfer measures what one inference costs besides
// TensorRT's own work: GPU.Do on a umem worker, attaching and detaching two
// managed buffers (strict mode: cuStreamAttachMemAsync each way), the shim
// call and a real stream synchronisation. It needs a CUDA device.
func BenchmarkUmemFakeInfer(b *testing.B) {
	lib := fakeLibrary(b)
	dev, err := umem.OpenDevice(umem.DeviceOptions{Strict: true})
	if errors.Is(err, umem.ErrNoCUDA) {
		b.Skipf("no CUDA: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	w, err := dev.NewWorker()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	bk, err := New(Options{Library: lib, GPU: UmemGPU(dev, w)})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	e, err := bk.Load(context.Background(), fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "bench",
		Alloc: dev.NewAllocator(umem.StrategyManaged, umem.MemOptions{Kind: umem.KindManaged}), Shapes: map[string][]int64{"x": {8, 4}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Infer(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
