//go:build cgo && linux

package onnx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	pb "github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/internal/procfs/procfstest"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/umem"
)

var (
	backendOnce sync.Once
	testBackend *Backend
	backendErr  error
)

// ortBackend returns the process's backend. Without a library it skips the
// test, unless EDGED_REQUIRE_ORT=1 (CI) makes that a failure.
func ortBackend(t testing.TB) *Backend {
	t.Helper()
	backendOnce.Do(func() {
		lib := ""
		if os.Getenv(EnvLibrary) == "" {
			// The tree `make deps` fills, relative to this package.
			p := filepath.Join("..", "..", "third_party", "onnxruntime", runtime.GOARCH, Soname)
			if isFile(p) {
				lib = p
			}
		}
		testBackend, backendErr = New(Options{Library: lib})
	})
	if backendErr != nil {
		if os.Getenv("EDGED_REQUIRE_ORT") == "1" {
			t.Fatalf("EDGED_REQUIRE_ORT=1 but ONNX Runtime is unusable: %v", backendErr)
		}
		t.Skipf("ONNX Runtime not available (set %s, or run `make deps`): %v", EnvLibrary, backendErr)
	}
	return testBackend
}

func load(t testing.TB, model []byte, opts trt.LoadOptions) trt.Engine {
	t.Helper()
	e, err := ortBackend(t).Load(context.Background(), model, opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func build(t testing.TB, o demomodel.Options) []byte {
	t.Helper()
	b, err := demomodel.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func output(t testing.TB, e trt.Engine, name string) []float32 {
	t.Helper()
	for _, o := range e.Outputs() {
		if o.Name == name {
			v := o.Float32()
			if v == nil {
				t.Fatalf("output %s has no float32 host view", o.TensorSpec)
			}
			return v
		}
	}
	t.Fatalf("no output %q in %v", name, trt.SignatureOf(e))
	return nil
}

var squares = []demomodel.Square{
	{X: 0, Y: 0, Side: 8},
	{X: 20, Y: 30, Side: 10},
	{X: 50, Y: 51, Side: 13},
	{X: 3, Y: 40, Side: 5},
	{X: 33, Y: 7, Side: 1},
	{X: 56, Y: 0, Side: 8},
}

// runScenes renders every palette background with every square into the
// engine's input and checks class (through Expected) and centroid, and
// that the outputs equal the Go reference.
func runScenes(t *testing.T, e trt.Engine, o demomodel.Options) {
	t.Helper()
	size := demomodel.Size
	if o.InputSize != 0 {
		size = o.InputSize
	}
	in := e.Inputs()[0].Float32()
	for bg := range demomodel.Classes {
		for _, q := range squares {
			if q.X+q.Side > size || q.Y+q.Side > size {
				continue
			}
			if err := demomodel.Render(in, size, bg, q); err != nil {
				t.Fatal(err)
			}
			if err := e.Infer(context.Background()); err != nil {
				t.Fatalf("Infer: %v", err)
			}
			class, cen := output(t, e, demomodel.ClassOutput), output(t, e, demomodel.CentroidOutput)
			want := demomodel.Expected(bg, o.Permutation)
			if got := demomodel.Argmax(class); got != want {
				t.Errorf("variant %d, background %s, square %+v: class %d (%v), want %d", o.Permutation, demomodel.Labels[bg], q, got, class, want)
			}
			wx, wy := q.Centre(size)
			if dx, dy := math.Abs(float64(cen[0]-wx))*float64(size), math.Abs(float64(cen[1]-wy))*float64(size); dx > 1.5 || dy > 1.5 {
				t.Errorf("background %s, square %+v: centroid %v, want (%.4f, %.4f) within 1.5 px", demomodel.Labels[bg], q, cen, wx, wy)
			}
			rc, rcen, err := demomodel.Reference(o, in)
			if err != nil {
				t.Fatal(err)
			}
			for i := range rc {
				if math.Abs(float64(rc[i]-class[i])) > 1e-4 {
					t.Errorf("background %s, square %+v: class[%d] = %g, Go reference %g", demomodel.Labels[bg], q, i, class[i], rc[i])
				}
			}
			for i := range rcen {
				if math.Abs(float64(rcen[i]-cen[i])) > 1e-5 {
					t.Errorf("background %s, square %+v: centroid[%d] = %g, Go reference %g", demomodel.Labels[bg], q, i, cen[i], rcen[i])
				}
			}
		}
	}
}

func TestDemoModel(t *testing.T) {
	e := load(t, demomodel.Default, trt.LoadOptions{Name: "demo", Alloc: umem.NewHost()})
	if e.Backend() != BackendName {
		t.Errorf("Backend() = %q", e.Backend())
	}
	if err := trt.SignatureOf(e).Check(demomodel.Options{}.Signature()); err != nil {
		t.Fatal(err)
	}
	for _, ts := range [][]*trt.Tensor{e.Inputs(), e.Outputs()} {
		for _, tn := range ts {
			if tn.Buf.Kind() != umem.KindHost || tn.Buf.Len() != int(tn.Bytes()) {
				t.Errorf("tensor %s: buffer kind %s len %d", tn.TensorSpec, tn.Buf.Kind(), tn.Buf.Len())
			}
		}
	}
	runScenes(t, e, demomodel.Options{})
}

func TestEmptyMaskIsFinite(t *testing.T) {
	e := load(t, demomodel.Default, trt.LoadOptions{})
	in := e.Inputs()[0].Float32()
	if err := demomodel.Render(in, demomodel.Size, 2, demomodel.Square{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, v := range append(output(t, e, demomodel.ClassOutput), output(t, e, demomodel.CentroidOutput)...) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("output not finite without a square: %v", v)
		}
	}
	if got := demomodel.Argmax(output(t, e, demomodel.ClassOutput)); got != 2 {
		t.Errorf("class %d, want 2", got)
	}
}

func TestVariants(t *testing.T) {
	for n := 1; n <= demomodel.MaxVariant; n++ {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			b, err := demomodel.Variant(n)
			if err != nil {
				t.Fatal(err)
			}
			e := load(t, b, trt.LoadOptions{Name: "variant"})
			runScenes(t, e, demomodel.Options{Permutation: n})
		})
	}
}

func TestNaNVariant(t *testing.T) {
	e := load(t, build(t, demomodel.Options{NaN: true}), trt.LoadOptions{})
	in := e.Inputs()[0].Float32()
	if err := demomodel.Render(in, demomodel.Size, 0, squares[1]); err != nil {
		t.Fatal(err)
	}
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{demomodel.ClassOutput, demomodel.CentroidOutput} {
		for i, v := range output(t, e, name) {
			if !math.IsNaN(float64(v)) {
				t.Errorf("%s[%d] = %v, want NaN", name, i, v)
			}
		}
	}
}

func TestOtherSignatures(t *testing.T) {
	def := demomodel.Options{}.Signature()
	for _, o := range []demomodel.Options{{InputSize: 32}, {InputName: "pixels"}, {InputSize: 48, InputName: "frame", Permutation: 3}} {
		t.Run(fmt.Sprintf("%d-%s", o.InputSize, o.InputName), func(t *testing.T) {
			e := load(t, build(t, o), trt.LoadOptions{})
			got := trt.SignatureOf(e)
			if err := got.Check(o.Signature()); err != nil {
				t.Fatal(err)
			}
			if err := got.Check(def); !errors.Is(err, trt.ErrSignature) {
				t.Errorf("Check against the default signature = %v, want ErrSignature", err)
			}
			runScenes(t, e, o)
		})
	}
}

func TestDynamicBatch(t *testing.T) {
	model := build(t, demomodel.Options{DynamicBatch: true})
	_, err := ortBackend(t).Load(context.Background(), model, trt.LoadOptions{Name: "dyn"})
	if !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), `"image"`) {
		t.Fatalf("Load without shapes = %v, want ErrSignature naming the input", err)
	}
	for _, bad := range [][]int64{{1, 3, 64}, {1, 4, 64, 64}, {0, 3, 64, 64}} {
		_, err := ortBackend(t).Load(context.Background(), model, trt.LoadOptions{Shapes: map[string][]int64{"image": bad}})
		if !errors.Is(err, trt.ErrSignature) {
			t.Errorf("Load with shape %v = %v, want ErrSignature", bad, err)
		}
	}
	e := load(t, model, trt.LoadOptions{Shapes: map[string][]int64{"image": {1, 3, 64, 64}}})
	if err := trt.SignatureOf(e).Check(demomodel.Options{}.Signature()); err != nil {
		t.Fatalf("resolved signature: %v", err)
	}
	// The pipeline's image size, without naming the input (preprocess
	// width and height alone): the first input, batch 1.
	ei := load(t, model, trt.LoadOptions{Image: &trt.ImageShape{Height: 64, Width: 64}})
	if err := trt.SignatureOf(ei).Check(demomodel.Options{}.Signature()); err != nil {
		t.Fatalf("signature resolved from the image size: %v", err)
	}
	if _, err := ortBackend(t).Load(context.Background(), model, trt.LoadOptions{Image: &trt.ImageShape{Height: 32, Width: 64}}); !errors.Is(err, trt.ErrSignature) {
		t.Errorf("an image size the model does not take: %v, want ErrSignature", err)
	}
	runScenes(t, e, demomodel.Options{})

	e2 := load(t, model, trt.LoadOptions{Shapes: map[string][]int64{"image": {2, 3, 64, 64}}})
	want := trt.Signature{
		Inputs: []trt.TensorSpec{{Name: "image", Type: trt.Float32, Shape: []int64{2, 3, 64, 64}}},
		Outputs: []trt.TensorSpec{
			{Name: "class", Type: trt.Float32, Shape: []int64{2, 8}},
			{Name: "centroid", Type: trt.Float32, Shape: []int64{2, 2}},
		},
	}
	if err := trt.SignatureOf(e2).Check(want); err != nil {
		t.Fatalf("batch 2: %v", err)
	}
	in := e2.Inputs()[0].Float32()
	plane := 3 * 64 * 64
	if err := errors.Join(demomodel.Render(in[:plane], 64, 1, squares[1]), demomodel.Render(in[plane:], 64, 6, squares[2])); err != nil {
		t.Fatal(err)
	}
	if err := e2.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	class := output(t, e2, "class")
	if a, b := demomodel.Argmax(class[:8]), demomodel.Argmax(class[8:]); a != 1 || b != 6 {
		t.Errorf("batch 2 classes %d, %d, want 1, 6", a, b)
	}
}

func TestInvalidModels(t *testing.T) {
	b := ortBackend(t)
	cases := map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("this is not an ONNX model, just text\x00\x01\x02"),
		"truncated": demomodel.Default[:len(demomodel.Default)/2],
		"tensorrt":  append([]byte("ftrt\x00\x00\x00\x00"), make([]byte, 64)...),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := b.Load(context.Background(), m, trt.LoadOptions{Name: "bad.onnx"})
			if err == nil {
				e.Close()
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, trt.ErrEngineInvalid) || !strings.Contains(err.Error(), `"bad.onnx"`) {
				t.Errorf("Load = %v, want ErrEngineInvalid naming the model", err)
			}
		})
	}
}

// deviceOnly hands out buffers the CPU cannot read.
type deviceOnly struct{ umem.HostAllocator }

type deviceBuf struct{ umem.Buffer }

func (a *deviceOnly) Alloc(n int) (umem.Buffer, error) {
	b, err := a.HostAllocator.Alloc(n)
	return deviceBuf{b}, err
}
func (deviceBuf) Kind() umem.Kind             { return umem.KindDevice }
func (deviceBuf) Host() ([]byte, error)       { return nil, umem.ErrNotHostAccessible }
func (a *deviceOnly) Strategy() umem.Strategy { return umem.StrategyDevice }

func TestDeviceMemoryRejected(t *testing.T) {
	_, err := ortBackend(t).Load(context.Background(), demomodel.Default, trt.LoadOptions{Alloc: &deviceOnly{}})
	if !errors.Is(err, trt.ErrBackend) || !errors.Is(err, umem.ErrNotHostAccessible) {
		t.Fatalf("Load = %v, want ErrBackend wrapping ErrNotHostAccessible", err)
	}
}

func TestCloseAndCancel(t *testing.T) {
	e, err := ortBackend(t).Load(context.Background(), demomodel.Default, trt.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Infer(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Infer(cancelled) = %v", err)
	}
	if _, err := ortBackend(t).Load(ctx, demomodel.Default, trt.LoadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Load(cancelled) = %v", err)
	}
	bufs := []umem.Buffer{e.Inputs()[0].Buf, e.Outputs()[0].Buf}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, b := range bufs {
		if _, err := b.Host(); !errors.Is(err, umem.ErrReleased) {
			t.Errorf("buffer after Close: %v, want ErrReleased", err)
		}
	}
	if err := e.Infer(context.Background()); !errors.Is(err, trt.ErrClosed) {
		t.Errorf("Infer after Close = %v, want ErrClosed", err)
	}
}

func TestOneLibraryPerProcess(t *testing.T) {
	b := ortBackend(t)
	var zero Backend
	if _, err := zero.Load(context.Background(), demomodel.Default, trt.LoadOptions{}); !errors.Is(err, trt.ErrBackend) {
		t.Errorf("Load on a zero Backend = %v, want trt.ErrBackend", err)
	}
	if b.Version() == "" || b.Library() == "" {
		t.Errorf("backend reports library %q version %q", b.Library(), b.Version())
	}
	again, err := New(Options{})
	if err != nil || again.Library() != b.Library() {
		t.Errorf("New without a path = %v, %v; want the loaded library", again, err)
	}
	link := filepath.Join(t.TempDir(), Soname)
	abs, _ := filepath.Abs(b.Library())
	if err := os.Symlink(abs, link); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Library: link}); err != nil {
		t.Errorf("New with a symlink to the loaded library: %v", err)
	}
	other := filepath.Join(t.TempDir(), Soname)
	if err := os.WriteFile(other, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Library: other})
	if !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("New with another library = %v", err)
	}
}

func TestInferAllocatesNothing(t *testing.T) {
	e := load(t, demomodel.Default, trt.LoadOptions{})
	if err := demomodel.Render(e.Inputs()[0].Float32(), demomodel.Size, 4, squares[2]); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var err error
	allocs := testing.AllocsPerRun(200, func() {
		if e := e.Infer(ctx); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("Infer allocates %v times per call, want 0", allocs)
	}
}

// TestLoadCloseCycles loads and closes the model repeatedly: file
// descriptors and goroutines must not grow, and resident memory must stay
// within a generous bound (glibc's heap grows a little and levels off).
// Under an emulator (EDGED_EXEC_WRAPPER, make test-arm64) the resident size
// is the emulator's, so it is only logged, and fewer cycles run.
func TestLoadCloseCycles(t *testing.T) {
	b := ortBackend(t)
	emulated := os.Getenv("EDGED_EXEC_WRAPPER") != ""
	cycle := func() {
		e, err := b.Load(context.Background(), demomodel.Default, trt.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Infer(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		cycle()
	}
	fds, gs, rss := countFDs(t), runtime.NumGoroutine(), procfstest.RSS(t, 0)
	n := 200
	if emulated {
		n = 50
	}
	for range n {
		cycle()
	}
	if got := countFDs(t); got > fds {
		t.Errorf("open files grew from %d to %d over %d load/close cycles", fds, got, n)
	}
	if got := runtime.NumGoroutine(); got > gs {
		t.Errorf("goroutines grew from %d to %d", gs, got)
	}
	got := procfstest.RSS(t, 0)
	t.Logf("resident memory %d KiB -> %d KiB over %d load/close cycles", rss>>10, got>>10, n)
	if got > rss+32<<20 && !emulated {
		t.Errorf("resident memory grew from %d MiB to %d MiB over %d cycles", rss>>20, got>>20, n)
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func BenchmarkInfer(b *testing.B) {
	e := load(b, demomodel.Default, trt.LoadOptions{})
	if err := demomodel.Render(e.Inputs()[0].Float32(), demomodel.Size, 4, squares[2]); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Infer(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	be := ortBackend(b)
	b.ReportAllocs()
	for b.Loop() {
		e, err := be.Load(context.Background(), demomodel.Default, trt.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}

// TestConstModelEveryType runs the project's test models through ONNX
// Runtime: an output of every element type edged reads comes back with
// its values, and the metadata_props come back as the engine's metadata.
func TestConstModelEveryType(t *testing.T) {
	v := []float32{0, 1, 2, 100, 7, 1}
	types := []struct {
		onnx int
		trt  trt.DataType
	}{
		{pb.DTFloat, trt.Float32}, {pb.DTFloat16, trt.Float16}, {pb.DTInt8, trt.Int8}, {pb.DTUint8, trt.Uint8},
		{pb.DTInt32, trt.Int32}, {pb.DTInt64, trt.Int64}, {pb.DTBool, trt.Bool},
	}
	var outs []pb.ConstOutput
	for _, ty := range types {
		outs = append(outs, pb.ConstOutput{Name: "out_" + ty.trt.String(), Type: ty.onnx, Dims: []int64{1, 6}, Values: v})
	}
	model := pb.ConstModel("images", 8, 8, outs, [2]string{"task", "detect"}, [2]string{"names", "{0: 'a', 1: 'b'}"})
	e := load(t, model, trt.LoadOptions{Name: "const"})
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, ty := range types {
		o := e.Outputs()[i]
		if o.Type != ty.trt || o.Name != "out_"+ty.trt.String() {
			t.Fatalf("output %d is %s, want %s", i, o.TensorSpec, ty.trt)
		}
		got := o.ReadFloat32(make([]float32, 6))
		for k := range v {
			want := v[k]
			if ty.trt == trt.Bool && want != 0 {
				want = 1
			}
			if got[k] != want {
				t.Errorf("%s: value %d = %v, want %v", ty.trt, k, got[k], want)
			}
		}
	}
	md := trt.MetadataOf(e)
	if md == nil || md.Task != trt.TaskDetect || strings.Join(md.ClassNames(), ",") != "a,b" {
		t.Errorf("metadata %v", md)
	}
}

// TestFloatAttribute: onnxproto's FLOAT attributes (the EfficientNMS_TRT
// node of the hil tests' model has them) read as ONNX Runtime reads them.
func TestFloatAttribute(t *testing.T) {
	g := pb.Msg(nil).
		Bytes(pb.GraphNode, pb.Node{Op: "LeakyRelu", Name: "y", Inputs: []string{"x"}, Outputs: []string{"y"},
			Attrs: []pb.Attr{pb.FloatAttr("alpha", 0.25)}}.Encode()).
		Str(pb.GraphName, "g").
		Bytes(pb.GraphInput, pb.ValueInfo("x", 1, 2)).
		Bytes(pb.GraphOutput, pb.ValueInfo("y", 1, 2))
	model := pb.Msg(nil).Varint(pb.ModelIRVersion, 8).Bytes(pb.ModelGraph, g).
		Bytes(pb.ModelOpsetImport, pb.Msg(nil).Str(pb.OpsetDomain, "").Varint(pb.OpsetVersion, 17))
	e := load(t, model, trt.LoadOptions{Name: "leaky"})
	copy(e.Inputs()[0].Float32(), []float32{-2, 3})
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if y := e.Outputs()[0].Float32(); y[0] != -0.5 || y[1] != 3 {
		t.Fatalf("LeakyRelu(alpha = 0.25) gave %v", y)
	}
}

// TestHugeInputRefusedBeforeAllocating: loaded for a pipeline whose engine
// has other inputs (a reload: LoadOptions.Want), a model declaring an
// input of [1, 3, 2^31, 64] float32 (1.5 TiB) is refused for its
// signature before anything is allocated; loaded without Want, its
// allocation fails with trt.ErrMemory, not a crash or a wrapped size.
func TestHugeInputRefusedBeforeAllocating(t *testing.T) {
	b := ortBackend(t)
	huge := pb.IdentityModel(pb.DTFloat, []int64{1, 3, 1 << 31, 64}, nil)
	want := trt.Signature{Inputs: []trt.TensorSpec{{Name: "input", Type: trt.Float32, Shape: []int64{1, 3, 64, 64}}}}
	_, err := b.Load(context.Background(), huge, trt.LoadOptions{Name: "huge", Want: want})
	if !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), "[1,3,2147483648,64]") {
		t.Fatalf("with the pipeline's signature: %v, want ErrSignature", err)
	}
	if _, err := b.Load(context.Background(), huge, trt.LoadOptions{Name: "huge"}); !errors.Is(err, trt.ErrMemory) {
		t.Fatalf("without: %v, want ErrMemory", err)
	}
}
