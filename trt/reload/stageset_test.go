package reload_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/trttest"
)

// unsharing hides trt.Sharer from a backend's engines.
type unsharing struct{ trt.Backend }

type plainEngine struct{ trt.Engine }

func (b unsharing) Load(ctx context.Context, m []byte, o trt.LoadOptions) (trt.Engine, error) {
	e, err := b.Backend.Load(ctx, m, o)
	if err != nil {
		return nil, err
	}
	return plainEngine{e}, nil
}

// TestStageSet: a model staged for three targets is loaded once (one
// budget check, the gate held until Install) and shared to the others,
// installed as one generation number; a target that refuses it leaves
// nothing open and the gate free; from a serving engine nothing is loaded
// and neither the gate nor the budget is asked; a backend whose engines
// cannot share loads one per target, each within the budget.
func TestStageSet(t *testing.T) {
	ctx := context.Background()
	model := trttest.Spec{Value: 1}.Bytes()
	loads := []trt.LoadOptions{{Name: "m"}, {Name: "m"}, {Name: "m"}}
	wants := make([]trt.Signature, 3)
	budgets := 0
	gate := reload.NewStagingGate(1)
	b := trttest.NewBackend()
	o := reload.StageOptions{Backend: b, Gate: gate, Budget: func(int64) error { budgets++; return nil }, WarmupTimeout: time.Second}

	set, _, err := reload.StageSet(ctx, model, nil, loads, wants, o)
	if err != nil {
		t.Fatal(err)
	}
	if b.Loads() != 1 || b.Shares() != 2 || budgets != 1 || b.Models() != 1 || b.Live() != 3 {
		t.Fatalf("loads %d shares %d budgets %d models %d live %d, want 1, 2, 1, 1, 3", b.Loads(), b.Shares(), budgets, b.Models(), b.Live())
	}
	gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := reload.Stage(gctx, model, loads[0], trt.Signature{}, reload.StageOptions{Backend: b, Gate: gate}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a staging while the set holds the gate: %v, want it to wait", err)
	}
	cancel()
	hots := []*trt.Hot{{}, {}, {}}
	for i, g := range set.Install(hots, "m", [32]byte{1}, 7) {
		if g.Number != 7 || !trt.SameWeights(g.Engine, set.Engines[0]) {
			t.Errorf("target %d: generation %d, shared %v", i, g.Number, trt.SameWeights(g.Engine, set.Engines[0]))
		}
	}

	// From a serving engine: shared, nothing loaded, no gate, no budget.
	gen := hots[0].Acquire()
	gate2 := reload.NewStagingGate(1)
	o2 := o
	o2.Gate = gate2
	held, err := reload.Stage(ctx, model, loads[0], trt.Signature{}, reload.StageOptions{Backend: b, Gate: gate2})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close() // holds gate2 meanwhile
	budgets = 0
	more, _, err := reload.StageSet(ctx, nil, gen.Engine, loads[:2], wants[:2], o2)
	gen.Release()
	if err != nil {
		t.Fatalf("sharing from a serving engine: %v", err)
	}
	if b.Loads() != 2 || budgets != 0 || len(more.Engines) != 2 || !trt.SameWeights(more.Engines[1], set.Engines[0]) {
		t.Errorf("from a serving engine: loads %d budgets %d", b.Loads(), budgets)
	}
	more.Close()

	// A target that refuses it: nothing left open, the gate free.
	live := b.Live()
	bad := []trt.Signature{{}, {Inputs: []trt.TensorSpec{{Name: "other", Type: trt.Float32, Shape: []int64{1}}}, Outputs: trttest.DefaultOutputs}}
	if _, failed, err := reload.StageSet(ctx, model, nil, loads[:2], bad, o); !errors.Is(err, trt.ErrSignature) || failed != 1 {
		t.Errorf("a target with another signature: failed %d, %v; want 1 and ErrSignature", failed, err)
	}
	if b.Live() != live {
		t.Errorf("%d engines left open by a refused set", b.Live()-live)
	}
	gctx, cancel = context.WithTimeout(ctx, time.Second)
	st, err := reload.Stage(gctx, model, loads[0], trt.Signature{}, reload.StageOptions{Backend: b, Gate: gate})
	cancel()
	if err != nil {
		t.Fatalf("the gate after a refused set: %v", err)
	}
	st.Close()

	// Engines that cannot share: one load per target, each budgeted.
	budgets = 0
	o3 := o
	o3.Backend = unsharing{b}
	before := b.Loads()
	sep, _, err := reload.StageSet(ctx, model, nil, loads, wants, o3)
	if err != nil {
		t.Fatal(err)
	}
	if b.Loads()-before != 3 || budgets != 3 {
		t.Errorf("unsharing engines: %d loads, %d budget checks, want 3 and 3", b.Loads()-before, budgets)
	}
	sep.Close()
	for _, h := range hots {
		h.Close()
	}
}

// TestStageSetReadsTheModelWhenSharingFails: sharing from a serving
// engine without the model's bytes, a target whose engine cannot share
// gets one of its own from StageOptions.Model (read once for all such
// targets, only when needed), as it would with the bytes at hand; without
// Model it fails, naming why; an error reading the model is the target's.
func TestStageSetReadsTheModelWhenSharingFails(t *testing.T) {
	ctx := context.Background()
	model := trttest.Spec{Value: 1}.Bytes()
	b := trttest.NewBackend()
	o := reload.StageOptions{Backend: unsharing{b}, Budget: func(int64) error { return nil }, WarmupTimeout: time.Second}
	serving, err := reload.Stage(ctx, model, trt.LoadOptions{Name: "m"}, trt.Signature{}, o)
	if err != nil {
		t.Fatal(err)
	}
	hot := &trt.Hot{}
	serving.Install(hot, "m", [32]byte{1})
	defer hot.Close()
	gen := hot.Acquire()
	defer gen.Release()
	loads := []trt.LoadOptions{{Name: "m"}, {Name: "m"}}
	wants := make([]trt.Signature, 2)

	if _, _, err := reload.StageSet(ctx, nil, gen.Engine, loads, wants, o); !errors.Is(err, trt.ErrBackend) {
		t.Errorf("without the bytes and without Model: %v, want ErrBackend", err)
	}
	reads := 0
	o.Model = func() ([]byte, error) { reads++; return model, nil }
	set, _, err := reload.StageSet(ctx, nil, gen.Engine, loads, wants, o)
	if err != nil {
		t.Fatalf("with Model: %v", err)
	}
	if reads != 1 || set.Separate != 2 || len(set.Engines) != 2 {
		t.Errorf("with Model: %d reads, %d separate, %d engines; want 1, 2, 2", reads, set.Separate, len(set.Engines))
	}
	set.Close()

	o.Model = func() ([]byte, error) { return nil, errors.New("the file changed since it was loaded") }
	if _, failed, err := reload.StageSet(ctx, nil, gen.Engine, loads, wants, o); !errors.Is(err, trt.ErrBackend) || failed != 0 {
		t.Errorf("Model failing: failed %d, %v", failed, err)
	}

	// An engine that shares never reads the model.
	reads = 0
	o.Backend = b
	o.Model = func() ([]byte, error) { reads++; return model, nil }
	st, err := reload.Stage(ctx, model, trt.LoadOptions{Name: "m"}, trt.Signature{}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	shared, _, err := reload.StageSet(ctx, nil, st.Engine, loads, wants, o)
	if err != nil || reads != 0 {
		t.Errorf("sharing: %v, %d reads", err, reads)
	}
	if shared != nil {
		shared.Close()
	}
}
