//go:build tensorrt && cgo && linux

package tensorrt

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/umem"
)

// The tests below run the shim against a fake libnvinfer (see
// testdata/fakenvinfer/fake.cc for what that does and does not prove).

var (
	fakeOnce sync.Once
	fakePath string
	fakeErr  string
)

// fakeLibrary builds the fake libnvinfer once per test binary against the
// same TensorRT 10.3 headers as the shim, with $CXX (else g++) and the cgo
// flags in the environment (so a cross-built test gets an arm64 fake), or
// skips. $EDGED_FAKE_NVINFER names a prebuilt one instead.
func fakeLibrary(t testing.TB) string {
	t.Helper()
	if v := HeaderVersion(); v.Major != 10 || v.Minor != 3 {
		t.Skipf("the fake libnvinfer implements TensorRT 10.3; the shim was built against %s headers", v)
	}
	fakeOnce.Do(func() {
		if p := os.Getenv("EDGED_FAKE_NVINFER"); p != "" { // prebuilt, for machines without the headers
			fakePath = p
			return
		}
		cxxflags := strings.Fields(os.Getenv("CGO_CXXFLAGS"))
		inc := os.Getenv("TENSORRT_INCLUDE")
		for i, f := range cxxflags {
			if inc == "" && (f == "-isystem" || f == "-I") && i+1 < len(cxxflags) {
				if _, err := os.Stat(filepath.Join(cxxflags[i+1], "NvInferRuntime.h")); err == nil {
					inc = cxxflags[i+1]
				}
			}
		}
		if inc == "" {
			inc = filepath.Join("..", "..", "third_party", "TensorRT-10.3.0", "include")
		}
		if _, err := os.Stat(filepath.Join(inc, "NvInferRuntime.h")); err != nil {
			fakeErr = fmt.Sprintf("no TensorRT 10.3 headers in %s (set TENSORRT_INCLUDE): %v", inc, err)
			return
		}
		cxx := os.Getenv("CXX")
		if cxx == "" {
			cxx = "g++"
		}
		dir, err := os.MkdirTemp("", "edged-fakenvinfer")
		if err != nil {
			fakeErr = err.Error()
			return
		}
		fakePath = filepath.Join(dir, "libnvinfer.so.10")
		// The fake libnvinfer (with its soname, so the plugin libraries'
		// dependency on it is the library already loaded), then the fake
		// libnvinfer_plugin and custom plugin library linked against it.
		for _, lib := range []struct{ out, src, soname string }{
			{"libnvinfer.so.10", "fake.cc", "libnvinfer.so.10"},
			{"libnvinfer_plugin.so.10", "plugin.cc", ""},
			{"libedgedfakeplugin.so", "customplugin.cc", ""},
		} {
			args := append([]string{"-std=c++17", "-shared", "-fPIC", "-O1", "-o", filepath.Join(dir, lib.out)}, cxxflags...)
			args = append(args, "-Icudastub", "-isystem", inc, filepath.Join("testdata", "fakenvinfer", lib.src))
			if lib.soname != "" {
				args = append(args, "-Wl,-soname,"+lib.soname)
			} else {
				args = append(args, "-L"+dir, "-l:libnvinfer.so.10", "-Wl,-rpath,$ORIGIN")
			}
			args = append(args, strings.Fields(os.Getenv("CGO_LDFLAGS"))...)
			if out, err := exec.Command(cxx, args...).CombinedOutput(); err != nil {
				fakeErr = fmt.Sprintf("building the fake %s with %s: %v\n%s", lib.out, cxx, err, out)
				return
			}
		}
		if f, err := elf.Open(fakePath); err == nil {
			if m, ok := elfMachine[runtime.GOARCH]; ok && f.Machine != m {
				fakeErr = fmt.Sprintf("%s builds for %v, this test runs on %s", cxx, f.Machine, runtime.GOARCH)
			}
			f.Close()
		}
	})
	if fakeErr != "" {
		t.Skip(fakeErr)
	}
	return fakePath
}

// fakePluginLibraries are the fake libnvinfer_plugin.so.10 and the fake
// custom plugin library beside the fake libnvinfer.
func fakePluginLibraries(t testing.TB) (standard, custom string) {
	dir := filepath.Dir(fakeLibrary(t))
	return filepath.Join(dir, "libnvinfer_plugin.so.10"), filepath.Join(dir, "libedgedfakeplugin.so")
}

// fakePlan makes a plan for the fake: a 28-byte header recording TensorRT
// maj.min, then the body lines.
func fakePlan(maj, min byte, body string) []byte {
	h := make([]byte, plan.HeaderSize)
	copy(h, "ftrt")
	h[24], h[25], h[26], h[27] = maj, min, 0, 26
	return append(h, body...)
}

const dynPlan = "tensor in x 0 0 -1,4 1,4 2,4 8,4\ntensor out y 0 0 -1,4\n"

// fakeGPU stands in for umem's device and worker: Do runs f on a locked
// OS thread and records which, and NewStream hands out numbered streams.
type fakeGPU struct {
	current atomic.Int64 // tid of the last Do
	calls   atomic.Int64
	streams atomic.Int64
	mu      sync.Mutex
	open    map[uintptr]*fakeStream
}

func (g *fakeGPU) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g.current.Store(int64(unix.Gettid()))
	g.calls.Add(1)
	return f()
}

func (g *fakeGPU) NewStream() (Stream, error) {
	s := &fakeStream{g: g, h: uintptr(0x1000 * (g.streams.Add(1)))}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = map[uintptr]*fakeStream{}
	}
	g.open[s.h] = s
	return s, nil
}

func (g *fakeGPU) openStreams() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

type fakeStream struct {
	g                         *fakeGPU
	h                         uintptr
	syncs, attached, detached atomic.Int64
}

func (s *fakeStream) Handle() uintptr    { return s.h }
func (s *fakeStream) Synchronize() error { s.syncs.Add(1); return nil }
func (s *fakeStream) Attach(umem.Buffer) error {
	s.attached.Add(1)
	return nil
}
func (s *fakeStream) Detach(umem.Buffer) error {
	s.detached.Add(1)
	return nil
}
func (s *fakeStream) Close() error {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	delete(s.g.open, s.h)
	return nil
}

// cpuAlloc hands out page-aligned host memory whose "device" address is its
// host address, which is what the fake (running on the CPU) dereferences.
// Only for tests: real TensorRT needs CUDA memory from umem.
type cpuAlloc struct{ offset uintptr }

func (a cpuAlloc) Strategy() umem.Strategy { return "test-cpu" }
func (a cpuAlloc) Alloc(n int) (umem.Buffer, error) {
	b, err := umem.NewHost().Alloc(n + int(a.offset))
	if err != nil {
		return nil, err
	}
	h, _ := b.Host()
	return cpuBuffer{Buffer: b, addr: uintptr(unsafe.Pointer(&h[0])) + a.offset}, nil
}

type cpuBuffer struct {
	umem.Buffer
	addr uintptr
}

func (b cpuBuffer) Device() uintptr { return b.addr }

func newBackend(t *testing.T, opts Options) (*Backend, *fakeGPU) {
	t.Helper()
	opts.Library = fakeLibrary(t)
	g := &fakeGPU{}
	if opts.GPU == nil {
		opts.GPU = g
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, g
}

func drain(b *Backend) ([]string, uint64) {
	recs, dropped := b.DrainLog(nil)
	var out []string
	for _, r := range recs {
		out = append(out, r.Severity.String()+": "+r.Message)
	}
	return out, dropped
}

func TestFakeEndToEnd(t *testing.T) {
	b, g := newBackend(t, Options{LogLevel: SeverityInfo})
	if b.Library().Version != (plan.Version{Major: 10, Minor: 3}) {
		t.Errorf("Library = %v", b.Library())
	}
	ctx := context.Background()
	en, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "demo", Alloc: cpuAlloc{},
		Shapes: map[string][]int64{"x": {3, 4}}})
	if err != nil {
		t.Fatal(err)
	}
	e := en.(*Engine)
	sig := trt.SignatureOf(e)
	want := trt.Signature{
		Inputs:  []trt.TensorSpec{{Name: "x", Type: trt.Float32, Shape: []int64{3, 4}}},
		Outputs: []trt.TensorSpec{{Name: "y", Type: trt.Float32, Shape: []int64{3, 4}}},
	}
	if err := sig.Check(want); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if e.Backend() != Name || e.DeviceMemory() != 3<<20 || e.Built() != (plan.Version{Major: 10, Minor: 3, Build: 26}) {
		t.Errorf("Backend %q DeviceMemory %d Built %v", e.Backend(), e.DeviceMemory(), e.Built())
	}

	x := e.Inputs()[0].Float32()
	for i := range x {
		x[i] = float32(i)
	}
	before := g.calls.Load()
	if err := e.Infer(ctx); err != nil {
		t.Fatal(err)
	}
	y := e.Outputs()[0].Float32()
	for i := range y {
		if y[i] != 2*float32(i)+1 {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], 2*float32(i)+1)
		}
	}
	s := e.stream.(*fakeStream)
	if g.calls.Load() == before || s.syncs.Load() != 1 || s.attached.Load() != 2 || s.detached.Load() != 2 {
		t.Errorf("Do calls %d->%d, syncs %d, attached %d, detached %d", before, g.calls.Load(),
			s.syncs.Load(), s.attached.Load(), s.detached.Load())
	}

	// TensorRT saw the engine's stream for the profile and the enqueue, on
	// the OS thread of GPU.Do.
	logs, _ := drain(b)
	joined := strings.Join(logs, "\n")
	for _, want := range []string{
		"info: fake: deserialized an engine with 2 I/O tensors",
		fmt.Sprintf("info: fake: setOptimizationProfileAsync(0) on stream %#x", s.h),
		fmt.Sprintf("info: fake: enqueueV3 on stream %#x", s.h),
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("log lacks %q:\n%s", want, joined)
		}
	}
	m := regexp.MustCompile(`enqueueV3 on stream \S+ tid=(\d+)`).FindStringSubmatch(joined)
	if m == nil || m[1] != fmt.Sprint(g.current.Load()) {
		t.Errorf("enqueue ran on thread %v, GPU.Do last on %d", m, g.current.Load())
	}

	// Steady state allocates nothing.
	if n := testing.AllocsPerRun(100, func() {
		if err := e.Infer(ctx); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Infer allocates %v times per call", n)
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := e.Infer(ctx); !errors.Is(err, trt.ErrClosed) {
		t.Errorf("Infer after Close: %v", err)
	}
	if g.openStreams() != 0 {
		t.Errorf("%d streams left open", g.openStreams())
	}
}

func TestFakeDefaultShapeIsOpt(t *testing.T) {
	b, _ := newBackend(t, Options{})
	e, err := b.Load(context.Background(), fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if s := e.Inputs()[0].Shape; !slices.Equal(s, []int64{2, 4}) {
		t.Errorf("input shape %v, want the profile's opt [2 4]", s)
	}
	if s := e.Outputs()[0].Shape; !slices.Equal(s, []int64{2, 4}) {
		t.Errorf("output shape %v, want [2 4]", s)
	}
}

func TestFakeLoadErrors(t *testing.T) {
	b, g := newBackend(t, Options{LogLevel: SeverityInfo})
	ctx := context.Background()
	load := func(p []byte, opts trt.LoadOptions) error {
		if opts.Alloc == nil {
			opts.Alloc = cpuAlloc{}
		}
		opts.Name = "bad"
		e, err := b.Load(ctx, p, opts)
		if err == nil {
			e.Close()
		}
		return err
	}
	tests := []struct {
		name string
		err  error
		is   error
		want []string
	}{
		{"version in header", load(fakePlan(10, 4, dynPlan), trt.LoadOptions{}), trt.ErrVersion,
			[]string{"model bad", "TensorRT 10.4.0.26", "TensorRT 10.3.0", "trtexec"}},
		{"not a plan", load([]byte("this is not an engine, just some text"), trt.LoadOptions{}), trt.ErrEngineInvalid,
			[]string{"ftrt"}},
		{"out of memory", load(fakePlan(10, 3, dynPlan+"flag oom-context\n"), trt.LoadOptions{}), trt.ErrMemory,
			[]string{"creating an execution context failed", "kFAILED_ALLOCATION", "out of device memory"}},
		{"bf16", load(fakePlan(10, 3, "tensor in x 7 0 1,4\ntensor out y 0 0 1,4\n"), trt.LoadOptions{}), trt.ErrEngineInvalid,
			[]string{`input "x"`, "kBF16"}},
		{"hwc8", load(fakePlan(10, 3, "tensor in x 0 0 1,4\ntensor out y 0 2 1,4\n"), trt.LoadOptions{}), trt.ErrEngineInvalid,
			[]string{`output "y"`, "kHWC8", "fake vectorized format", "--outputIOFormats"}},
		{"outside profile", load(fakePlan(10, 3, dynPlan), trt.LoadOptions{Shapes: map[string][]int64{"x": {9, 4}}}),
			trt.ErrSignature, []string{"outside the engine's optimization profile"}},
		{"unknown shape name", load(fakePlan(10, 3, dynPlan), trt.LoadOptions{Shapes: map[string][]int64{"images": {1, 4}}}),
			trt.ErrSignature, []string{`"images"`, `its inputs: "x"`}},
		{"data-dependent output", load(fakePlan(10, 3, "tensor in x 0 0 2,4\ntensor out y 0 0 1,1,-1\n"), trt.LoadOptions{}),
			trt.ErrEngineInvalid, []string{"data-dependent"}},
		{"host memory", load(fakePlan(10, 3, dynPlan), trt.LoadOptions{Alloc: umem.NewHost()}), trt.ErrBackend,
			[]string{"no device address"}},
		{"misaligned", load(fakePlan(10, 3, dynPlan), trt.LoadOptions{Alloc: cpuAlloc{offset: 128}}), trt.ErrBackend,
			[]string{"not 256-byte aligned"}},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.is)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%s: %q does not contain %q", tc.name, tc.err, w)
			}
		}
	}
	if n := g.openStreams(); n != 0 {
		t.Errorf("%d streams left open by failed loads", n)
	}
	// The header check refused the version-mismatched plan before TensorRT saw it.
	logs, _ := drain(b)
	if n := strings.Count(strings.Join(logs, "\n"), "deserialized an engine"); n != 8 {
		t.Errorf("the fake deserialized %d engines, want 8 (all but the version-mismatched and non-plan files):\n%s",
			n, strings.Join(logs, "\n"))
	}
}

func TestFakeVersionTextFromTensorRT(t *testing.T) {
	// A version-compatible backend accepts a 10.2 header; the fake then
	// refuses the engine the way TensorRT does, and the text maps to
	// trt.ErrVersion.
	b, _ := newBackend(t, Options{VersionCompatible: true})
	_, err := b.Load(context.Background(), fakePlan(10, 2, dynPlan), trt.LoadOptions{Name: "old", Alloc: cpuAlloc{}})
	if !errors.Is(err, trt.ErrVersion) || !strings.Contains(err.Error(), "Version tag does not match") ||
		!strings.Contains(err.Error(), "kUNSPECIFIED_ERROR") {
		t.Errorf("got %v", err)
	}
	// With the engine marked version-compatible the fake loads it.
	e, err := b.Load(context.Background(), fakePlan(10, 2, dynPlan+"flag vc\n"), trt.LoadOptions{Name: "vc", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

func TestFakeInferError(t *testing.T) {
	b, _ := newBackend(t, Options{})
	e, err := b.Load(context.Background(), fakePlan(10, 3, dynPlan+"flag fail-enqueue\n"), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = e.Infer(context.Background())
	if !errors.Is(err, ErrInference) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"enqueueV3 failed", "kFAILED_EXECUTION: fake: enqueue failed on purpose",
		"TensorRT log: fake: the kernel launch failed (logged)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not contain %q", err, want)
		}
	}
	s := e.(*Engine).stream.(*fakeStream)
	if s.syncs.Load() != 1 || s.detached.Load() != s.attached.Load() {
		t.Errorf("after a failed enqueue: syncs %d attached %d detached %d", s.syncs.Load(), s.attached.Load(), s.detached.Load())
	}
	// The message of one failure does not leak into the next call's.
	err2 := e.Infer(context.Background())
	if strings.Count(err2.Error(), "enqueue failed on purpose") != 1 {
		t.Errorf("stale errors: %v", err2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Infer(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Infer: %v", err)
	}
}

func TestFakeLogRing(t *testing.T) {
	b, _ := newBackend(t, Options{LogCapacity: 8})
	e, err := b.Load(context.Background(), fakePlan(10, 3, dynPlan+"flag spam=50\n"), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	logs, dropped := drain(b)
	if len(logs) != 8 || dropped != 42 {
		t.Fatalf("kept %d records, dropped %d; want 8 and 42", len(logs), dropped)
	}
	if logs[0] != "warning: fake: warning 42" || logs[7] != "warning: fake: warning 49" {
		t.Errorf("kept %v, want the newest", logs)
	}
	if logs, dropped := drain(b); len(logs) != 0 || dropped != 0 {
		t.Errorf("second drain: %v %d", logs, dropped)
	}
}

func TestFakeLibraryVersion(t *testing.T) {
	lib := fakeLibrary(t)
	for _, tc := range []struct {
		env, want string
	}{
		{"80601", "TensorRT 8.6.1), but this edged was built against TensorRT 10.3.0.26 headers"},
		{"100200", "older than the TensorRT 10.3.0.26 headers"},
	} {
		t.Setenv("EDGED_FAKE_TRT_VERSION", tc.env)
		_, err := New(Options{Library: lib, GPU: &fakeGPU{}})
		if !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), lib) {
			t.Errorf("library %s: got %v, want %q", tc.env, err, tc.want)
		}
	}
	t.Setenv("EDGED_FAKE_TRT_VERSION", "100500")
	b, err := New(Options{Library: lib, GPU: &fakeGPU{}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if logs, _ := drain(b); len(logs) != 1 || !strings.Contains(logs[0], "newer than") {
		t.Errorf("newer minor: logs %v", logs)
	}
}

func TestFakeNoLibrary(t *testing.T) {
	_, err := New(Options{Library: "/nonexistent/libnvinfer.so.10"})
	if !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), "/nonexistent/libnvinfer.so.10") {
		t.Errorf("got %v", err)
	}
	if l, err := Probe(""); err == nil {
		t.Skipf("this machine has %s", l)
	}
	_, err = New(Options{})
	for _, want := range []string{"libnvinfer.so.10", "libnvinfer.so.8", "not found"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("default names: %v does not contain %q", err, want)
		}
	}
}

func TestFakeBackendOutlivesEngines(t *testing.T) {
	// Closing the backend first must keep the runtime until the last
	// engine is closed (the fake aborts the process when a runtime is
	// destroyed before its engines).
	b, _ := newBackend(t, Options{})
	ctx := context.Background()
	e1, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "a", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	e2, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "b", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "c", Alloc: cpuAlloc{}}); !errors.Is(err, trt.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	var wg sync.WaitGroup
	for _, e := range []trt.Engine{e1, e2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if err := e.Infer(ctx); err != nil {
					t.Error(err)
					return
				}
			}
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// BenchmarkFakeInfer measures the Go and shim overhead of one inference
// (the fake's CPU work on 32 floats is negligible).
func BenchmarkFakeInfer(b *testing.B) {
	lib := fakeLibrary(b)
	bk, err := New(Options{Library: lib, GPU: &fakeGPU{}})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	e, err := bk.Load(context.Background(), fakePlan(10, 3, dynPlan), trt.LoadOptions{Name: "bench", Alloc: cpuAlloc{},
		Shapes: map[string][]int64{"x": {8, 4}}})
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
