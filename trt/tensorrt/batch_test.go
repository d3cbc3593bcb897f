//go:build tensorrt && cgo && linux

package tensorrt

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

// An engine loaded for batches of up to 4 frames on a profile of 1..8:
// tensors for 4 entries bound once, each batch size's input shape set on
// the context (setInputShape) before the enqueueV3 that first runs it and
// not again while it stays, the results of every entry, the same memory
// whatever the size, and nothing allocated per batch.
func TestFakeBatchProfile(t *testing.T) {
	b, _ := newBackend(t, Options{LogLevel: SeverityInfo})
	ctx := context.Background()
	en, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer en.Close()
	e := en.(trt.Batched)
	if d := e.BatchDim(); d != (trt.BatchDim{Min: 1, Opt: 2, Max: 8}) || e.MaxBatch() != 4 || e.Runs() != 4 {
		t.Fatalf("BatchDim %+v MaxBatch %d Runs %d", d, e.MaxBatch(), e.Runs())
	}
	in, out := e.Inputs()[0], e.Outputs()[0]
	if !slices.Equal(in.Shape, []int64{4, 4}) || !slices.Equal(out.Shape, []int64{4, 4}) {
		t.Fatalf("shapes %v %v, want [4 4]", in.Shape, out.Shape)
	}
	x := in.Float32()
	for i := range x {
		x[i] = float32(i)
	}
	drain(b)
	check := func(n int) {
		t.Helper()
		if err := e.SetBatch(n); err != nil {
			t.Fatal(err)
		}
		if err := e.Infer(ctx); err != nil {
			t.Fatal(err)
		}
		in, out := e.Inputs()[0], e.Outputs()[0]
		if !slices.Equal(in.Shape, []int64{int64(n), 4}) || !slices.Equal(out.Shape, []int64{int64(n), 4}) || e.Runs() != n {
			t.Fatalf("batch %d: shapes %v %v runs %d", n, in.Shape, out.Shape, e.Runs())
		}
		if in.Buf != e.Inputs()[0].Buf || trt.EntryBytes(in) != 16 {
			t.Fatalf("batch %d: another buffer or entry size %d", n, trt.EntryBytes(in))
		}
		y := out.Float32()
		for i := range y {
			if y[i] != 2*float32(i)+1 {
				t.Fatalf("batch %d: y[%d] = %v, want %v", n, i, y[i], 2*float32(i)+1)
			}
		}
	}
	check(2)
	check(2)
	check(4)
	check(1)
	logs, _ := drain(b)
	var calls []string
	re := regexp.MustCompile(`setInputShape\(x, \[\d+,4\]\)|enqueueV3`)
	for _, l := range logs {
		if m := re.FindString(l); m != "" {
			calls = append(calls, m)
		}
	}
	want := []string{"setInputShape(x, [2,4])", "enqueueV3", "enqueueV3", "setInputShape(x, [4,4])", "enqueueV3",
		"setInputShape(x, [1,4])", "enqueueV3"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if n := testing.AllocsPerRun(50, func() {
		for _, n := range []int{3, 1, 4} {
			if err := e.SetBatch(n); err != nil {
				t.Fatal(err)
			}
			if err := e.Infer(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}); n != 0 {
		t.Errorf("%v allocations per three batches, want 0", n)
	}
	for _, n := range []int{0, 5} {
		if err := e.SetBatch(n); !errors.Is(err, trt.ErrBatch) {
			t.Errorf("SetBatch(%d): %v, want ErrBatch", n, err)
		}
	}
}

// Batches below the profile's min run padded to it; a fixed batch
// dimension runs every batch at its size.
func TestFakeBatchPadded(t *testing.T) {
	b, _ := newBackend(t, Options{})
	ctx := context.Background()
	for _, c := range []struct {
		name, plan string
		batch      int
		dim        trt.BatchDim
		runs       map[int]int // batch -> entries run
	}{
		{"profile min 2", "tensor in x 0 0 -1,4 2,4 4,4 8,4\ntensor out y 0 0 -1,4\n", 3, trt.BatchDim{Min: 2, Opt: 4, Max: 8},
			map[int]int{1: 2, 2: 2, 3: 3}},
		{"fixed 4", "tensor in x 0 0 4,4\ntensor out y 0 0 4,4\n", 2, trt.BatchDim{Min: 4, Opt: 4, Max: 4, Fixed: true},
			map[int]int{1: 4, 2: 4}},
	} {
		en, err := b.Load(ctx, fakePlan(10, 3, c.plan), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}, Batch: c.batch})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := en.(trt.Batched)
		if e.BatchDim() != c.dim {
			t.Errorf("%s: BatchDim %+v, want %+v", c.name, e.BatchDim(), c.dim)
		}
		for n, runs := range c.runs {
			if err := e.SetBatch(n); err != nil {
				t.Fatal(err)
			}
			if err := e.Infer(ctx); err != nil {
				t.Fatalf("%s: batch %d: %v", c.name, n, err)
			}
			if e.Runs() != runs || e.Inputs()[0].Shape[0] != int64(runs) || e.Outputs()[0].Shape[0] != int64(runs) {
				t.Errorf("%s: batch %d runs %d (%v), want %d", c.name, n, e.Runs(), e.Inputs()[0].Shape, runs)
			}
		}
		en.Close()
	}
}

// A batch the engine cannot run is refused at load, naming the profile.
func TestFakeBatchErrors(t *testing.T) {
	b, _ := newBackend(t, Options{})
	for _, c := range []struct {
		name, plan string
		batch      int
		want       string
	}{
		{"beyond the profile", dynPlan, 9, "batch 9 is beyond the engine's optimization profile (min 1, opt 2, max 8)"},
		{"beyond a fixed batch", "tensor in x 0 0 4,4\ntensor out y 0 0 4,4\n", 5, "batch 5 is more than the model's fixed batch dimension 4"},
		{"an output without the batch", "tensor in x 0 0 -1,4 1,4 2,4 8,4\ntensor out y 0 0 1,4\n", 2, `output "y" has shape [1,4] with 2 entries`},
		{"inputs that disagree", "tensor in x 0 0 -1,4 1,4 2,4 8,4\ntensor in z 0 0 3,4\ntensor out y 0 0 -1,4\n", 2, `input "z"'s first dimension (fixed 3)`},
	} {
		_, err := b.Load(context.Background(), fakePlan(10, 3, c.plan), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}, Batch: c.batch})
		if !errors.Is(err, trt.ErrBatch) || !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBatch saying %q", c.name, err, c.want)
		}
	}
	// an engine loaded without Batch is not one for batches
	en, err := b.Load(context.Background(), fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	defer en.Close()
	if err := en.(trt.Batched).SetBatch(1); !errors.Is(err, trt.ErrBatch) {
		t.Errorf("SetBatch on an engine loaded without Batch: %v", err)
	}
}

// A context shared from a batched engine runs batches of its own size on
// its own tensors.
func TestFakeBatchShare(t *testing.T) {
	b, _ := newBackend(t, Options{})
	ctx := context.Background()
	en, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer en.Close()
	sh, err := en.(trt.Sharer).Share(ctx, trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	s := sh.(trt.Batched)
	if s.MaxBatch() != 2 || s.Inputs()[0].Shape[0] != 2 || s.Inputs()[0].Buf == en.Inputs()[0].Buf {
		t.Fatalf("shared: MaxBatch %d, input %v, or the first engine's memory", s.MaxBatch(), s.Inputs()[0].Shape)
	}
	for _, e := range []trt.Batched{en.(trt.Batched), s} {
		if err := e.SetBatch(1); err != nil {
			t.Fatal(err)
		}
		x := e.Inputs()[0].Float32()
		for i := range x {
			x[i] = float32(i + 10)
		}
		if err := e.Infer(ctx); err != nil {
			t.Fatal(err)
		}
		if y := e.Outputs()[0].Float32(); len(y) != 4 || y[3] != 2*13+1 {
			t.Fatalf("batch 1: %v", y)
		}
	}
}
