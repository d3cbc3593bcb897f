package reload_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/trt/onnx"
	"github.com/edged-dev/edged/trt/reload"
)

var (
	ortOnce sync.Once
	ortBE   *onnx.Backend
	ortErr  error
)

// ortBackend returns ONNX Runtime, found through EDGED_ONNXRUNTIME_LIB or
// the tree `make deps` fills. Without it the test is skipped, unless
// EDGED_REQUIRE_ORT=1 makes that a failure.
func ortBackend(t testing.TB) *onnx.Backend {
	t.Helper()
	ortOnce.Do(func() {
		lib := ""
		if os.Getenv(onnx.EnvLibrary) == "" {
			p, err := filepath.Abs(filepath.Join("..", "third_party", "onnxruntime", runtime.GOARCH, onnx.Soname))
			if _, serr := os.Stat(p); err == nil && serr == nil {
				lib = p
			}
		}
		ortBE, ortErr = onnx.New(onnx.Options{Library: lib})
	})
	if ortErr != nil {
		if os.Getenv("EDGED_REQUIRE_ORT") == "1" {
			t.Fatalf("EDGED_REQUIRE_ORT=1 but ONNX Runtime is unusable: %v", ortErr)
		}
		t.Skipf("ONNX Runtime not available (set %s or run `make deps`): %v", onnx.EnvLibrary, ortErr)
	}
	return ortBE
}

func demo(t testing.TB, o demomodel.Options) []byte {
	t.Helper()
	b, err := demomodel.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// classify feeds the serving engine a demo scene for every background and
// checks the classes the given variant must report.
func classify(t *testing.T, hot *trt.Hot, variant int, gen uint64) {
	t.Helper()
	g := hot.Acquire()
	if g == nil {
		t.Fatal("no engine")
	}
	defer g.Release()
	if g.Number != gen {
		t.Fatalf("serving generation %d, want %d", g.Number, gen)
	}
	in := g.Engine.Inputs()[0].Float32()
	var class []float32
	for _, o := range g.Engine.Outputs() {
		if o.Name == "class" {
			class = o.Float32()
		}
	}
	if in == nil || class == nil {
		t.Fatalf("engine tensors %v", trt.SignatureOf(g.Engine))
	}
	for bg := range demomodel.Classes {
		if err := demomodel.Render(in, demomodel.Size, bg, demomodel.Square{X: 20, Y: 24, Side: 12}); err != nil {
			t.Fatal(err)
		}
		if err := g.Engine.Infer(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := demomodel.Argmax(class), demomodel.Expected(bg, variant); got != want {
			t.Fatalf("generation %d (variant %d), background %d: class %d, want %d", gen, variant, bg, got, want)
		}
	}
}

func TestReloadORTDemoVariants(t *testing.T) {
	be := ortBackend(t)
	h := newHarness(t, func(o *reload.Options) { o.Backend = be })
	h.start(demo(t, demomodel.Options{}))
	if err := h.r.Want(0).Check(demomodel.Options{}.Signature()); err != nil {
		t.Fatalf("pinned signature: %v", err)
	}
	classify(t, h.hot, 0, 1)
	for n := 1; n <= 3; n++ {
		h.replace("model.onnx", demo(t, demomodel.Options{Permutation: n}))
		ev := h.expect(reload.OutcomeReloaded)
		if ev.Generation != uint64(n+1) {
			t.Fatalf("event %v", ev)
		}
		classify(t, h.hot, n, uint64(n+1))
	}
	for _, c := range []struct {
		name  string
		model []byte
		want  error
	}{
		{"NaN", demo(t, demomodel.Options{Permutation: 5, NaN: true}), trt.ErrWarmup},
		{"input size 32", demo(t, demomodel.Options{Permutation: 5, InputSize: 32}), trt.ErrSignature},
		{"renamed input", demo(t, demomodel.Options{Permutation: 5, InputName: "images"}), trt.ErrSignature},
		{"garbage", []byte("\x08\x07this is not a protobuf"), trt.ErrEngineInvalid},
		{"truncated", demo(t, demomodel.Options{Permutation: 5})[:1000], trt.ErrEngineInvalid},
		{"empty", []byte{}, trt.ErrEngineInvalid},
	} {
		h.replace("model.onnx", c.model)
		ev := h.expect(reload.OutcomeRejected)
		if !errors.Is(ev.Reason, c.want) {
			t.Errorf("%s: reason %v, want %v", c.name, ev.Reason, c.want)
		}
		classify(t, h.hot, 3, 4)
	}
	h.replace("model.onnx", demo(t, demomodel.Options{Permutation: 6}))
	h.expect(reload.OutcomeReloaded)
	classify(t, h.hot, 6, 5)
}
