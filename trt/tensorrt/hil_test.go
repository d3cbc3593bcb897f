//go:build hil && tensorrt

package tensorrt

// Hardware-in-the-loop tests for a Jetson (or any machine with TensorRT and
// a CUDA GPU). docs/HIL.md says how to build the engine and run
// them. Environment:
//
//	EDGED_HIL_TRT_ENGINE    engine built by trtexec from EDGED_HIL_ONNX (required; unset skips)
//	EDGED_HIL_ONNX          the ONNX model the engine was built from (the demo model: edged demo-model -o demo.onnx)
//	EDGED_HIL_VARIANT       demo-model variant of that model (default 0)
//	EDGED_HIL_TRT_ENGINE_B  optional second engine (e.g. from edged demo-model -variant 3) for the hot swap
//	EDGED_HIL_VARIANT_B     its variant (default 0)
//	EDGED_HIL_TOL           absolute tolerance against ONNX Runtime (default 0.05; 0.25 suits --fp16 engines)
//	EDGED_HIL_GPU           CUDA device ordinal (default 0)
//	EDGED_HIL_TRT_LIBRARY   libnvinfer path (default: the sonames)
//	EDGED_ONNXRUNTIME_LIB   ONNX Runtime library, as for edged

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/trt/onnx"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/umem"
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

func envFloat(t *testing.T, name string, def float64) float64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return f
}

func readEnvFile(t *testing.T, name string) []byte {
	t.Helper()
	p := os.Getenv(name)
	if p == "" {
		t.Fatalf("%s is not set", name)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

type hil struct {
	place *umem.Placement
	gpu   GPU
	b     *Backend
	ort   *onnx.Backend
	alloc umem.Allocator
}

func setupHIL(t *testing.T) *hil {
	t.Helper()
	if os.Getenv("EDGED_HIL_TRT_ENGINE") == "" {
		t.Skip("EDGED_HIL_TRT_ENGINE is not set (see docs/HIL.md)")
	}
	return setupHILOptions(t, Options{})
}

// setupHILOptions opens the device and a backend with opts (its library,
// GPU and log level set here).
func setupHILOptions(t *testing.T, opts Options) *hil {
	t.Helper()
	// Managed memory, as on a Jetson; umem applies the
	// concurrentManagedAccess = 0 rules where the device needs them.
	place, err := umem.Open(umem.Options{Device: envInt(t, "EDGED_HIL_GPU", 0), Strategy: umem.StrategyManaged})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { place.Close() })
	t.Logf("umem: %s", place.Reason)
	w, err := place.Device.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	h := &hil{place: place, gpu: UmemGPU(place.Device, w), alloc: place.Alloc}
	opts.Library, opts.GPU, opts.LogLevel = os.Getenv("EDGED_HIL_TRT_LIBRARY"), h.gpu, SeverityInfo
	h.b, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.b.Close()
		logs, dropped := h.b.DrainLog(nil)
		for _, r := range logs {
			t.Logf("TensorRT %s: %s", r.Severity, r.Message)
		}
		if dropped > 0 {
			t.Logf("TensorRT: %d log records dropped", dropped)
		}
	})
	t.Logf("TensorRT %s, headers %s", h.b.Library(), HeaderVersion())
	h.ort, err = onnx.New(onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *hil) load(t *testing.T, b trt.Backend, model []byte, name string) trt.Engine {
	t.Helper()
	e, err := b.Load(context.Background(), model, trt.LoadOptions{Name: name, Alloc: h.alloc})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// frame renders scene i into an engine's input and returns its background.
func frame(e trt.Engine, i int) (bg int, err error) {
	in := e.Inputs()[0]
	img := in.Float32()
	if img == nil {
		return 0, errors.New("input " + in.Name + " is not host-accessible")
	}
	size := int(in.Shape[len(in.Shape)-1])
	bg = i % demomodel.Classes
	side := size / 4
	q := demomodel.Square{X: (i * 7) % (size - side), Y: (i * 3) % (size - side), Side: side}
	return bg, demomodel.Render(img, size, bg, q)
}

func mustFrame(t *testing.T, e trt.Engine, i int) int {
	t.Helper()
	bg, err := frame(e, i)
	if err != nil {
		t.Fatal(err)
	}
	return bg
}

func argmax(v []float32) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

func TestHILMatchesONNXRuntime(t *testing.T) {
	h := setupHIL(t)
	variant := envInt(t, "EDGED_HIL_VARIANT", 0)
	tol := envFloat(t, "EDGED_HIL_TOL", 0.05)
	te := h.load(t, h.b, readEnvFile(t, "EDGED_HIL_TRT_ENGINE"), "trt")
	defer te.Close()
	oe := h.load(t, h.ort, readEnvFile(t, "EDGED_HIL_ONNX"), "onnx")
	defer oe.Close()
	if err := trt.SignatureOf(te).Check(trt.SignatureOf(oe)); err != nil {
		t.Fatalf("the engine and the ONNX model differ: %v", err)
	}
	ctx := context.Background()
	worst := 0.0
	for i := range 32 {
		bg := mustFrame(t, te, i)
		mustFrame(t, oe, i)
		if err := te.Infer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := oe.Infer(ctx); err != nil {
			t.Fatal(err)
		}
		for k, out := range te.Outputs() {
			got, want := out.Float32(), oe.Outputs()[k].Float32()
			if got == nil || len(got) != len(want) {
				t.Fatalf("output %s: %d values from TensorRT, %d from ONNX Runtime", out.Name, len(got), len(want))
			}
			for j := range got {
				d := math.Abs(float64(got[j] - want[j]))
				worst = max(worst, d)
				if math.IsNaN(float64(got[j])) || d > tol {
					t.Errorf("frame %d output %s[%d]: TensorRT %v, ONNX Runtime %v (tolerance %v)", i, out.Name, j, got[j], want[j], tol)
				}
			}
		}
		if out := te.Outputs()[0]; out.Name == demomodel.ClassOutput {
			if c, want := argmax(out.Float32()), demomodel.Expected(bg, variant); c != want {
				t.Errorf("frame %d: class %d, want %d", i, c, want)
			}
		}
	}
	t.Logf("largest difference to ONNX Runtime over 32 frames: %g", worst)
}

func TestHILHotSwapUnderLoad(t *testing.T) {
	h := setupHIL(t)
	files := [][]byte{readEnvFile(t, "EDGED_HIL_TRT_ENGINE")}
	variants := []int{envInt(t, "EDGED_HIL_VARIANT", 0)}
	if os.Getenv("EDGED_HIL_TRT_ENGINE_B") != "" {
		files = append(files, readEnvFile(t, "EDGED_HIL_TRT_ENGINE_B"))
		variants = append(variants, envInt(t, "EDGED_HIL_VARIANT_B", 0))
	}
	var variantOf sync.Map // trt.Engine -> variant
	install := func(hot *trt.Hot, i int) {
		k := i % len(files)
		e := h.load(t, h.b, files[k], "swap")
		mustFrame(t, e, 0) // warm-up off the hot path
		if err := e.Infer(context.Background()); err != nil {
			t.Fatalf("warm-up: %v", err)
		}
		variantOf.Store(e, variants[k])
		hot.Install(e, "swap", sha256.Sum256(files[k]))
	}
	var hot trt.Hot
	install(&hot, 0)

	var frames, failures atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the pipeline
		defer close(done)
		var last uint64
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			g := hot.Acquire()
			if g.Number < last {
				t.Errorf("generation went back from %d to %d", last, g.Number)
			}
			last = g.Number
			bg, err := frame(g.Engine, i)
			if err == nil {
				err = g.Engine.Infer(context.Background())
			}
			if err == nil && g.Engine.Outputs()[0].Name == demomodel.ClassOutput {
				v, _ := variantOf.Load(g.Engine)
				if c, want := argmax(g.Engine.Outputs()[0].Float32()), demomodel.Expected(bg, v.(int)); c != want {
					err = errors.New("wrong class " + strconv.Itoa(c) + ", want " + strconv.Itoa(want))
				}
			}
			g.Release()
			if err != nil {
				failures.Add(1)
				t.Errorf("frame %d on generation %d: %v", i, g.Number, err)
			}
			frames.Add(1)
		}
	}()
	const swaps = 20
	for i := 1; i <= swaps; i++ {
		install(&hot, i)
		time.Sleep(20 * time.Millisecond) // let frames run on each generation; not synchronisation
	}
	close(stop)
	<-done
	hot.Close()
	if n := hot.Current(); n != nil {
		t.Errorf("Hot still has generation %d", n.Number)
	}
	t.Logf("%d frames across %d swaps, %d failed", frames.Load(), swaps, failures.Load())
	if frames.Load() == 0 {
		t.Error("no frames ran")
	}
}

func TestHILRejectsBadEngines(t *testing.T) {
	h := setupHIL(t)
	good := readEnvFile(t, "EDGED_HIL_TRT_ENGINE")
	f, err := plan.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("version bytes patched", func(t *testing.T) {
		if lib := h.b.Library().Version; lib.Less(plan.Version{Major: 8, Minor: 6}) {
			t.Skipf("TensorRT %s: engines before 8.6 do not record their version in bytes 24..27", lib)
		}
		p := append([]byte(nil), good...)
		p[f.Offset+24]++ // another major
		_, err := h.b.Load(context.Background(), p, trt.LoadOptions{Name: "patched", Alloc: h.alloc})
		if !errors.Is(err, trt.ErrVersion) {
			t.Fatalf("got %v, want trt.ErrVersion", err)
		}
		t.Log(err)
	})
	t.Run("truncated", func(t *testing.T) {
		_, err := h.b.Load(context.Background(), good[:f.Offset+len(f.Plan)/2], trt.LoadOptions{Name: "truncated", Alloc: h.alloc})
		if !errors.Is(err, trt.ErrEngineInvalid) && !errors.Is(err, trt.ErrVersion) {
			t.Fatalf("got %v, want trt.ErrEngineInvalid", err)
		}
		t.Log(err)
	})
	t.Run("corrupt body", func(t *testing.T) {
		p := append([]byte(nil), good...)
		for i := f.Offset + plan.HeaderSize; i < len(p); i += 97 {
			p[i] ^= 0xff
		}
		e, err := h.b.Load(context.Background(), p, trt.LoadOptions{Name: "corrupt", Alloc: h.alloc})
		if err == nil {
			// TensorRT has no checksum over weights: a flipped weight may load.
			e.Close()
			t.Skip("TensorRT loaded an engine with flipped body bytes (no checksum): the warm-up check of the reload must catch such files")
		}
		t.Log(err)
	})
}
