//go:build cgo && linux

package onnx

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	pb "github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
)

// graph is a model (opset 17) of nodes over float32 inputs and outputs
// named with their dimensions (negative: the symbolic "batch").
func graph(nodes []pb.Node, inits []pb.Tensor, in, out map[string][]int64, order ...string) []byte {
	g := pb.Msg(nil)
	for _, n := range nodes {
		g = g.Bytes(pb.GraphNode, n.Encode())
	}
	g = g.Str(pb.GraphName, "batch_test")
	for _, t := range inits {
		g = g.Bytes(pb.GraphInitializer, t.Encode())
	}
	for _, name := range order {
		if d, ok := in[name]; ok {
			g = g.Bytes(pb.GraphInput, pb.ValueInfo(name, d...))
		}
	}
	for _, name := range order {
		if d, ok := out[name]; ok {
			g = g.Bytes(pb.GraphOutput, pb.ValueInfo(name, d...))
		}
	}
	return pb.Msg(nil).Varint(pb.ModelIRVersion, 8).Str(pb.ModelProducerName, "edged-test").Bytes(pb.ModelGraph, g).
		Bytes(pb.ModelOpsetImport, pb.Msg(nil).Str(pb.OpsetDomain, "").Varint(pb.OpsetVersion, 17))
}

// A dynamic (symbolic) batch: tensors for 4 entries bound once; each batch
// size runs its own binding over the same memory, computing exactly its
// entries; nothing allocated per batch.
func TestBatchDynamic(t *testing.T) {
	model := pb.IdentityModel(pb.DTFloat, []int64{-1, 4}, []string{"batch"})
	en := load(t, model, trt.LoadOptions{Name: "id", Batch: 4})
	defer en.Close()
	e := en.(trt.Batched)
	if d := e.BatchDim(); d != (trt.BatchDim{Min: 1, Opt: 1}) || e.MaxBatch() != 4 || e.Runs() != 4 {
		t.Fatalf("BatchDim %+v MaxBatch %d Runs %d", d, e.MaxBatch(), e.Runs())
	}
	in, out := e.Inputs()[0], e.Outputs()[0]
	if !slices.Equal(in.Shape, []int64{4, 4}) || !slices.Equal(out.Shape, []int64{4, 4}) {
		t.Fatalf("shapes %v %v", in.Shape, out.Shape)
	}
	x := in.Float32()
	for i := range x {
		x[i] = float32(i)
	}
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if y := out.Float32(); !slices.Equal(y, x) {
		t.Fatalf("batch 4: %v, want %v", y, x)
	}
	if err := e.SetBatch(2); err != nil {
		t.Fatal(err)
	}
	in2, out2 := e.Inputs()[0], e.Outputs()[0]
	if !slices.Equal(in2.Shape, []int64{2, 4}) || !slices.Equal(out2.Shape, []int64{2, 4}) || in2.Buf != in.Buf || out2.Buf != out.Buf {
		t.Fatalf("batch 2: shapes %v %v, or other memory", in2.Shape, out2.Shape)
	}
	for i := range x {
		x[i] = float32(100 + i)
	}
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	y := out.Float32() // all 4 entries of the memory
	for i, v := range y {
		want := float32(100 + i)
		if i >= 8 {
			want = float32(i) // entries 2 and 3 were not run
		}
		if v != want {
			t.Fatalf("after batch 2: y[%d] = %v, want %v", i, v, want)
		}
	}
	if n := testing.AllocsPerRun(50, func() {
		for _, n := range []int{3, 1, 4} {
			if err := e.SetBatch(n); err != nil {
				t.Fatal(err)
			}
			if err := e.Infer(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}); n != 0 {
		t.Errorf("%v allocations per three batches, want 0", n)
	}
	for _, n := range []int{0, 5} {
		if err := e.SetBatch(n); !errors.Is(err, trt.ErrBatch) {
			t.Errorf("SetBatch(%d): %v", n, err)
		}
	}
}

// The image input of a detector exported with a dynamic batch: the
// pipeline's image size fixes height and width, the batch axis 0.
func TestBatchImageModel(t *testing.T) {
	model := build(t, demomodel.Options{DynamicBatch: true})
	en := load(t, model, trt.LoadOptions{Name: "demo", Batch: 3, Image: &trt.ImageShape{Height: 64, Width: 64}})
	defer en.Close()
	if s := en.Inputs()[0].Shape; !slices.Equal(s, []int64{3, 3, 64, 64}) {
		t.Fatalf("input %v", s)
	}
	for _, o := range en.Outputs() {
		if o.Shape[0] != 3 {
			t.Errorf("output %s", o.TensorSpec)
		}
	}
	e := en.(trt.Batched)
	for _, n := range []int{1, 2, 3} {
		if err := e.SetBatch(n); err != nil {
			t.Fatal(err)
		}
		if err := e.Infer(context.Background()); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		if e.Inputs()[0].Shape[0] != int64(n) || e.Outputs()[0].Shape[0] != int64(n) {
			t.Errorf("batch %d: %v %v", n, e.Inputs()[0].Shape, e.Outputs()[0].Shape)
		}
	}
	// engines shared from it run batches of their own
	sh, err := en.(trt.Sharer).Share(context.Background(), trt.LoadOptions{Batch: 2, Image: &trt.ImageShape{Height: 64, Width: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if s := sh.Inputs()[0].Shape; s[0] != 2 || !trt.SameWeights(en, sh) {
		t.Errorf("shared engine's input %v", s)
	}
}

// A fixed batch dimension runs every batch at its size (padded).
func TestBatchFixed(t *testing.T) {
	model := pb.IdentityModel(pb.DTFloat, []int64{4, 4}, nil)
	en := load(t, model, trt.LoadOptions{Name: "id4", Batch: 2})
	defer en.Close()
	e := en.(trt.Batched)
	if d := e.BatchDim(); d != (trt.BatchDim{Min: 4, Opt: 4, Max: 4, Fixed: true}) || e.Runs() != 4 {
		t.Fatalf("BatchDim %+v Runs %d", d, e.Runs())
	}
	if err := e.SetBatch(1); err != nil || e.Runs() != 4 || e.Inputs()[0].Shape[0] != 4 {
		t.Fatalf("SetBatch(1): %v, runs %d", err, e.Runs())
	}
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// What cannot be batched is refused at load, saying why.
func TestBatchErrors(t *testing.T) {
	sum := graph([]pb.Node{{Op: "ReduceSum", Name: "sum", Inputs: []string{"x", "axes"}, Outputs: []string{"y"},
		Attrs: []pb.Attr{pb.IntAttr("keepdims", 1)}}},
		[]pb.Tensor{{Name: "axes", Dims: []int64{1}, Ints: []int64{0}}},
		map[string][]int64{"x": {-1, 4}}, map[string][]int64{"y": {1, 4}}, "x", "y")
	two := graph([]pb.Node{{Op: "Add", Name: "add", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}}, nil,
		map[string][]int64{"a": {-1, 4}, "b": {3, 4}}, map[string][]int64{"y": {3, 4}}, "a", "b", "y")
	for _, c := range []struct {
		name  string
		model []byte
		batch int
		want  string
	}{
		{"beyond a fixed batch", pb.IdentityModel(pb.DTFloat, []int64{4, 4}, nil), 5, "batch 5 is more than the model's fixed batch dimension 4"},
		{"an output without the batch", sum, 2, "its first dimension is not the batch"},
		{"inputs that disagree", two, 3, `input "b"'s first dimension (fixed 3)`},
	} {
		_, err := ortBackend(t).Load(context.Background(), c.model, trt.LoadOptions{Name: "m", Batch: c.batch})
		if !errors.Is(err, trt.ErrBatch) || !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBatch saying %q", c.name, err, c.want)
		}
	}
	// loaded without Batch: one frame, not a batched engine
	en := load(t, pb.IdentityModel(pb.DTFloat, []int64{-1, 4}, []string{"batch"}), trt.LoadOptions{Name: "m", Shapes: map[string][]int64{"input": {1, 4}}})
	defer en.Close()
	if err := en.(trt.Batched).SetBatch(1); !errors.Is(err, trt.ErrBatch) {
		t.Errorf("SetBatch without Batch: %v", err)
	}
}

// TestThreadsAgree: a session of several intra-op threads (a batched
// pipeline's, whose pool blocks between inferences instead of spinning)
// loads and computes what one thread does (within float32 rounding: a
// kernel may split its sums otherwise across threads).
func TestThreadsAgree(t *testing.T) {
	model := build(t, demomodel.Options{DynamicBatch: true})
	var want []float32
	for _, threads := range []int{1, 4} {
		en := load(t, model, trt.LoadOptions{Name: "demo", Batch: 8, Threads: threads})
		e := en.(trt.Batched)
		x := e.Inputs()[0].Float32()
		for i := range x {
			x[i] = float32(i%251) / 251
		}
		for range 3 {
			if err := e.Infer(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		y := slices.Clone(e.Outputs()[0].Float32())
		if want == nil {
			want = y
		} else {
			for i := range y {
				if d := math.Abs(float64(y[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("%d threads: output %d is %v, one thread %v", threads, i, y[i], want[i])
				}
			}
		}
	}
}
