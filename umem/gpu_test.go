package umem

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// GPU tests run wherever a CUDA driver and device are found. They skip
// without one, unless EDGED_REQUIRE_GPU=1 makes a missing GPU a failure.
// EDGED_NVRTC_LIB names the NVRTC library when the default search would
// not find it.

func requireGPU() bool { return os.Getenv("EDGED_REQUIRE_GPU") == "1" }

func gpuDevice(t testing.TB, o DeviceOptions) *Device {
	t.Helper()
	d, err := OpenDevice(o)
	if err != nil {
		if errors.Is(err, ErrNoCUDA) && !requireGPU() {
			t.Skipf("no CUDA (set EDGED_REQUIRE_GPU=1 to fail instead): %v", err)
		}
		t.Fatalf("OpenDevice: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Device.Close: %v", err)
		}
	})
	return d
}

func gpuPlacement(t testing.TB, o Options) *Placement {
	t.Helper()
	p, err := Open(o)
	if err == nil && p.Device == nil {
		err = fmt.Errorf("%w: %s", ErrNoCUDA, p.Reason)
	}
	if err != nil {
		if errors.Is(err, ErrNoCUDA) && !requireGPU() {
			t.Skipf("no CUDA (set EDGED_REQUIRE_GPU=1 to fail instead): %v", err)
		}
		t.Fatalf("Open(%+v): %v", o, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var testCacheDir = func() string {
	dir, err := os.MkdirTemp("", "edged-umem-ptx-")
	if err != nil {
		panic(err)
	}
	return dir
}()

func compileOpts(dir string) CompileOptions {
	return CompileOptions{Name: "umem_test.cu", CacheDir: dir, Library: os.Getenv("EDGED_NVRTC_LIB")}
}

// testModule compiles the test kernels for d (through the shared cache).
func testModule(t testing.TB, d *Device) *Module {
	t.Helper()
	p, err := d.Compile(sumSource, compileOpts(testCacheDir))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	m, err := d.LoadModule(p.Code)
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func testSumRunner(t testing.TB, d *Device, m *Module) *sumRunner {
	t.Helper()
	sr, err := newSumRunner(d, m, uint32(4*d.Probe().Multiprocs), 256)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sr.close() })
	return sr
}

func TestGPUProbe(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{})
	p := d.Probe()
	t.Logf("probe:\n%s", p)
	if !p.CUDA || p.Name == "" || p.Major < 5 || p.Multiprocs < 1 || p.TotalMem == 0 || p.FreeMem == 0 || p.FreeMem > p.TotalMem || p.DriverVersion < 11000 {
		t.Errorf("implausible probe %+v", p)
	}
	if !p.UnifiedAddressing {
		t.Error("unifiedAddressing = 0: umem needs it (64-bit Linux always has it)")
	}
	pr, err := ProbeDevice(DeviceOptions{})
	if err != nil || pr.Name != p.Name {
		t.Errorf("ProbeDevice = %+v, %v", pr, err)
	}
	if _, err := OpenDevice(DeviceOptions{Ordinal: 1000}); err == nil || errors.Is(err, ErrNoCUDA) {
		t.Errorf("device 1000: %v, want a configuration error", err)
	}
}

// Every buffer kind, written by the CPU and read by a kernel, gives the
// CPU's checksum, under every strategy, with and without strict mode.
func TestGPUChecksumAllStrategies(t *testing.T) {
	const n = 1920 * 1080 * 2
	src := [2][]byte{make([]byte, n), make([]byte, n)}
	fillRandom(src[0], 11)
	fillRandom(src[1], 12)
	want := [2]uint64{checksumU32(src[0]), checksumU32(src[1])}
	for _, strict := range []bool{false, true} {
		for _, o := range []Options{
			{Strategy: StrategyAuto}, {Strategy: StrategyManaged}, {Strategy: StrategyManaged, NoPrefetch: true},
			{Strategy: StrategyPinned}, {Strategy: StrategyMapped}, {Strategy: StrategyDevice},
		} {
			o.Strict = strict
			t.Run(fmt.Sprintf("%s/noprefetch=%v/strict=%v", o.Strategy, o.NoPrefetch, strict), func(t *testing.T) {
				p := gpuPlacement(t, o)
				d := p.Device
				s := mustStream(t, d)
				sr := testSumRunner(t, d, testModule(t, d))
				pool, err := NewPool(p.Alloc, 3, n)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				up, err := p.NewUploader(s, n)
				if err != nil {
					t.Fatal(err)
				}
				defer up.Close()
				for i := range 12 {
					if err := frameCycle(pool, up, sr, s, src[i%2], want[i%2]); err != nil {
						t.Fatalf("frame %d (%s): %v", i, p.Reason, err)
					}
				}
				st := d.Stats()
				t.Logf("%s; stats %+v", p.Reason, st)
				if d.Strict() && st.Prefetches != 0 {
					t.Errorf("%d prefetches under the concurrentManagedAccess = 0 rules", st.Prefetches)
				}
				if p.Strategy == StrategyManaged && !d.Strict() && !o.NoPrefetch && st.Prefetches < 24 {
					t.Errorf("%d prefetches for 12 managed frames, want 2 per frame", st.Prefetches)
				}
			})
		}
	}
}

// Strict mode turns what would fault on a Jetson into errors, on any GPU.
func TestGPUStrictViolations(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{Strict: true})
	m := testModule(t, d)
	spin, err := m.Kernel("spin_until")
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := mustStream(t, d), mustStream(t, d)
	flag, _ := d.Alloc(4, MemOptions{Kind: KindMapped})
	out, _ := d.Alloc(4, MemOptions{Kind: KindMapped})
	global, _ := d.Alloc(1<<20, MemOptions{Kind: KindManaged, Global: true})
	hostAtt, _ := d.Alloc(1<<20, MemOptions{Kind: KindManaged})
	owned, _ := d.Alloc(1<<20, MemOptions{Kind: KindManaged})
	for _, b := range []*Mem{flag, out, global, hostAtt, owned} {
		defer b.Release()
	}
	flagWord := (*uint32)(flag.hostPtr())
	atomic.StoreUint32(flagWord, 0)
	*(*uint32)(out.hostPtr()) = 0
	if err := owned.Attach(s1); err != nil {
		t.Fatal(err)
	}
	// The flag and out words are shared with the running kernel on purpose.
	if err := flag.Attach(s1); err != nil {
		t.Fatal(err)
	}
	if err := out.Attach(s1); err != nil {
		t.Fatal(err)
	}
	var a Args
	a.Ptr(flag.Device())
	a.U64(uint64(60 * time.Second))
	a.Ptr(out.Device())
	if err := spin.Launch(s1, D1(1), D1(1), 0, &a); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			atomic.StoreUint32(flagWord, 1)
			s1.Synchronize()
		}
	}()
	if done, err := s1.Query(); err != nil || done {
		t.Fatalf("spinning stream reports done=%v, %v", done, err)
	}
	_, err = global.Host()
	wantErr(t, "Host of a GLOBAL managed buffer while a kernel runs", err, ErrGPUActive)
	_, err = owned.Host()
	wantErr(t, "Host of a buffer attached to the running stream", err, ErrOwnedByStream)
	wantErr(t, "Attach to a second stream", owned.Attach(s2), ErrOwnedByStream)
	if err := owned.Detach(s1); err != nil {
		t.Fatal(err)
	}
	_, err = owned.Host()
	wantErr(t, "Host while the detach waits behind the kernel", err, ErrOwnedByStream)
	if err := s2.Copy(hostAtt, owned, 16); err == nil {
		t.Error("Copy on a stream that owns neither buffer succeeded")
	}
	b, err := hostAtt.Host() // attach-HOST memory: legal while the GPU runs
	if err != nil {
		t.Fatalf("Host of an attach-HOST buffer while another stream runs: %v", err)
	}
	fillRandom(b, 5)

	atomic.StoreUint32(flagWord, 1)
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	released = true
	if got := atomic.LoadUint32((*uint32)(out.hostPtr())); got != 1 {
		t.Fatalf("spin kernel ended with %d, want 1 (released by the flag, not the timeout)", got)
	}
	flag.Detach(s1)
	out.Detach(s1)
	if _, err := global.Host(); err != nil {
		t.Errorf("GLOBAL buffer after the GPU went idle: %v", err)
	}
	if _, err := owned.Host(); err != nil {
		t.Errorf("detached buffer after sync: %v", err)
	}
	if st := d.Stats(); st.Prefetches != 0 || st.HostDenied < 3 {
		t.Errorf("stats %+v", st)
	}
}

// Where concurrentManagedAccess = 1, hand-overs prefetch, and the data
// survives the round trips.
func TestGPUPrefetchTransitions(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{})
	if d.Strict() {
		t.Skip("concurrentManagedAccess = 0: no prefetch on this device (the HIL tests cover it)")
	}
	s := mustStream(t, d)
	sr := testSumRunner(t, d, testModule(t, d))
	const n = 8 << 20
	m, err := d.Alloc(n, MemOptions{Kind: KindManaged, Prefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	for i := range 20 {
		b := hostOK(t, "managed", m)
		fillRandom(b, uint64(i))
		want := checksumU32(b)
		before := d.Stats().Prefetches
		if err := m.Attach(s); err != nil {
			t.Fatal(err)
		}
		if err := sr.run(s, m.Device(), n); err != nil {
			t.Fatal(err)
		}
		if err := m.Detach(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if got := d.Stats().Prefetches - before; got != 2 {
			t.Fatalf("%d prefetches per round trip, want 2", got)
		}
		got, err := sr.result()
		if err != nil || got != want {
			t.Fatalf("round %d: kernel checksum %d, %v; want %d", i, got, err, want)
		}
		if c := checksumU32(hostOK(t, "managed after the round trip", m)); c != want {
			t.Fatalf("round %d: host data changed by the round trip", i)
		}
	}
}

// The NVRTC cache is hit by a second Open of the device and by a second
// process.
func TestGPUNVRTCCache(t *testing.T) {
	dir := t.TempDir()
	d1 := gpuDevice(t, DeviceOptions{})
	p1, err := d1.Compile(sumSource, compileOpts(dir))
	if err != nil {
		t.Fatal(err)
	}
	if p1.FromCache || p1.NVRTC == "" || p1.CacheErr != nil || p1.Arch != d1.Probe().Arch() {
		t.Fatalf("first compile: from cache %v, NVRTC %q, cache error %v, arch %s", p1.FromCache, p1.NVRTC, p1.CacheErr, p1.Arch)
	}
	t.Logf("NVRTC %s compiled %d bytes of PTX for %s; key %s", p1.NVRTC, len(p1.Code), p1.Arch, p1.Key[:16])
	d1.Close()

	d2 := gpuDevice(t, DeviceOptions{})
	start := time.Now()
	p2, err := d2.Compile(sumSource, compileOpts(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !p2.FromCache || string(p2.Code) != string(p1.Code) {
		t.Fatalf("second Open: from cache %v, same code %v", p2.FromCache, string(p2.Code) == string(p1.Code))
	}
	t.Logf("cache hit in %v", time.Since(start))
	mod, err := d2.LoadModule(p2.Code)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	checkSum(t, d2, mod, 1<<20)

	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUNVRTCCacheChild$", "-test.v")
	cmd.Env = append(os.Environ(), "EDGED_NVRTC_CACHE_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "FROM_CACHE=true") {
		t.Fatalf("second process: %v\n%s", err, out)
	}
}

func TestGPUNVRTCCacheChild(t *testing.T) {
	dir := os.Getenv("EDGED_NVRTC_CACHE_CHILD")
	if dir == "" {
		t.Skip("run by TestGPUNVRTCCache")
	}
	d := gpuDevice(t, DeviceOptions{})
	p, err := d.Compile(sumSource, CompileOptions{CacheDir: dir, Library: "/nonexistent/libnvrtc.so"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("FROM_CACHE=%v\n", p.FromCache)
}

// The default NVRTC search finds the machine's library (run alone: NVRTC is
// loaded once per process).
func TestGPUNVRTCDefaultSearch(t *testing.T) {
	if os.Getenv("EDGED_NVRTC_LIB") != "" {
		t.Skip("EDGED_NVRTC_LIB is set")
	}
	d := gpuDevice(t, DeviceOptions{})
	p, err := d.Compile(sumSource, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("found NVRTC %s at %s", p.NVRTC, nvrtcPath())
}

// checkSum runs the sum kernel over n random bytes in device memory.
func checkSum(t *testing.T, d *Device, mod *Module, n int) {
	t.Helper()
	s := mustStream(t, d)
	defer s.Close()
	sr := testSumRunner(t, d, mod)
	src, _ := d.Alloc(n, MemOptions{Kind: KindPinned})
	dst, _ := d.Alloc(n, MemOptions{Kind: KindDevice})
	defer src.Release()
	defer dst.Release()
	b := hostOK(t, "pinned", src)
	fillRandom(b, 99)
	want := checksumU32(b)
	if err := src.Attach(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(dst, src, n); err != nil {
		t.Fatal(err)
	}
	if err := sr.run(s, dst.Device(), n); err != nil {
		t.Fatal(err)
	}
	src.Detach(s)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got, err := sr.result(); err != nil || got != want {
		t.Fatalf("checksum %d, %v; want %d", got, err, want)
	}
}

// Release frees: free device memory returns to where it was over 1000
// alloc/free cycles of each kind.
func TestGPUReleaseFrees(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{})
	s := mustStream(t, d)
	const big = 256 << 20
	free0, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Alloc(big, MemOptions{Kind: KindDevice})
	if err != nil {
		t.Fatal(err)
	}
	free1, _, _ := d.MemInfo()
	if free0-free1 < big {
		t.Fatalf("a %d MiB allocation moved free memory by %d MiB: the measurement cannot see leaks", big>>20, int64(free0-free1)>>20)
	}
	m.Release()
	kinds := []MemOptions{{Kind: KindDevice}, {Kind: KindPinned}, {Kind: KindMapped}, {Kind: KindManaged}}
	if !d.Strict() {
		kinds = append(kinds, MemOptions{Kind: KindManaged, Prefetch: true})
	}
	cycle := func(o MemOptions) error {
		n := 16 << 20
		if o.Kind == KindPinned || o.Kind == KindMapped {
			n = 1 << 20
		}
		m, err := d.Alloc(n, o)
		if err != nil {
			return err
		}
		if o.Kind == KindManaged {
			// Make the pages resident on the GPU before freeing.
			if err := m.Attach(s); err != nil {
				return err
			}
			if err := m.Detach(s); err != nil {
				return err
			}
		}
		return errors.Join(s.Synchronize(), m.Release())
	}
	for _, o := range kinds {
		cycle(o) // warm-up
	}
	start, _, _ := d.MemInfo()
	for _, o := range kinds {
		for i := range 1000 {
			if err := cycle(o); err != nil {
				t.Fatalf("%+v cycle %d: %v", o, i, err)
			}
		}
		now, _, _ := d.MemInfo()
		diff := int64(start) - int64(now)
		t.Logf("%s (prefetch=%v): free memory moved by %d KiB over 1000 cycles", o.Kind, o.Prefetch, diff>>10)
		if diff > 8<<20 || diff < -(8<<20) {
			t.Errorf("%s: free memory moved by %d MiB over 1000 alloc/free cycles", o.Kind, diff>>20)
		}
	}
	if st := d.Stats(); st.Buffers != 0 || st.Bytes != 0 {
		t.Errorf("stats after all releases: %+v", st)
	}
}

// The per-frame path allocates nothing, through cgo too.
func TestGPUFrameAllocsZero(t *testing.T) {
	for _, o := range []Options{{Strategy: StrategyAuto}, {Strategy: StrategyManaged}, {Strategy: StrategyMapped}, {Strategy: StrategyManaged, Strict: true}, {Strategy: StrategyDevice}} {
		t.Run(fmt.Sprintf("%s/strict=%v", o.Strategy, o.Strict), func(t *testing.T) {
			p := gpuPlacement(t, o)
			const n = 640 * 480 * 2
			s := mustStream(t, p.Device)
			sr := testSumRunner(t, p.Device, testModule(t, p.Device))
			pool, _ := NewPool(p.Alloc, 2, n)
			defer pool.Close()
			up, _ := p.NewUploader(s, n)
			defer up.Close()
			src := make([]byte, n)
			fillRandom(src, 7)
			want := checksumU32(src)
			var ferr error
			frame := func() {
				if err := frameCycle(pool, up, sr, s, src, want); err != nil && ferr == nil {
					ferr = err
				}
			}
			for range 5 {
				frame()
			}
			allocs := testing.AllocsPerRun(200, frame)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if allocs != 0 {
				t.Errorf("%v heap allocations per frame, want 0", allocs)
			}
		})
	}
}

// BlockingSync sets the primary context's flags before use and the device
// still works.
func TestGPUBlockingSync(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{BlockingSync: true})
	checkSum(t, d, testModule(t, d), 4<<20)
}

func TestGPUWorkerContext(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{})
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var tid int
	job := func() error {
		cur, err := d.drv.ctxGetCurrent()
		if err != nil {
			return err
		}
		if cur != d.Context() {
			return fmt.Errorf("current context %#x, want the primary %#x", cur, d.Context())
		}
		if tid != 0 && tid != gettid() {
			return errors.New("the worker changed OS threads")
		}
		tid = gettid()
		return d.drv.ctxSetCurrent(0)
	}
	for range 20 {
		if err := w.Do(job); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
}

func TestGPUEventsAndCopies(t *testing.T) {
	d := gpuDevice(t, DeviceOptions{})
	s := mustStream(t, d)
	const n = 64 << 20
	a, _ := d.Alloc(n, MemOptions{Kind: KindPinned})
	b, _ := d.Alloc(n, MemOptions{Kind: KindDevice})
	c, _ := d.Alloc(n, MemOptions{Kind: KindDevice})
	r, _ := d.Alloc(n, MemOptions{Kind: KindPinned})
	for _, m := range []*Mem{a, b, c, r} {
		defer m.Release()
	}
	fillRandom(hostOK(t, "a", a), 1)
	clear(hostOK(t, "r", r))
	e0, _ := d.NewEvent(true)
	e1, _ := d.NewEvent(true)
	defer e0.Close()
	defer e1.Close()
	a.Attach(s)
	r.Attach(s)
	if err := e0.Record(s); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ dst, src Buffer }{{b, a}, {c, b}, {r, c}} {
		if err := s.Copy(step.dst, step.src, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := e1.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := e1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if done, err := e1.Query(); !done || err != nil {
		t.Errorf("event query after sync: %v, %v", done, err)
	}
	el, err := e1.Elapsed(e0)
	if err != nil || el <= 0 {
		t.Fatalf("elapsed %v, %v", el, err)
	}
	t.Logf("HtoD+DtoD+DtoH of %d MiB: %v (%.1f GB/s per copy)", n>>20, el, 3*float64(n)/el.Seconds()/1e9)
	a.Detach(s)
	r.Detach(s)
	s.Synchronize()
	if string(hostOK(t, "a", a)) != string(hostOK(t, "r", r)) {
		t.Fatal("data changed in the copy round trip")
	}
}
