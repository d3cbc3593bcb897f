package umem

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeDriver models the CUDA driver in Go for unit tests: memory is mmap'ed
// host memory whose address doubles as the device address, a stream is
// busy from a kernel launch until the test finishes it or synchronizes,
// kernels are Go functions, and every call is logged.
type fakeDriver struct {
	t *testing.T

	mu       sync.Mutex
	props    fakeProps
	regions  map[uintptr][]byte // base -> memory
	kinds    map[uintptr]string // base -> "managed", "pinned", "device"
	attach   map[uintptr]uint32 // managed base -> last attach flags
	streams  map[uintptr]*fakeStream
	events   map[uintptr]*fakeStream // event -> stream recorded on (nil: done)
	next     uintptr
	calls    []string
	kernels  map[string]func(f *fakeDriver, a *Args)
	modules  map[uintptr]bool
	funcs    map[uintptr]string
	fail     map[string]Result // fail the next call of this name
	current  uintptr
	retained int
	freeMem  uint64
	quiet    bool // no call log (allocation tests)
}

type fakeProps struct {
	name       string
	integrated bool
	cma        bool
	managed    bool
	canMap     bool
	major      int
	minor      int
	total      uint64
	noPrefetch bool
	count      int
}

type fakeStream struct{ busy bool }

var discreteProps = fakeProps{name: "Fake H200", cma: true, managed: true, canMap: true, major: 9, minor: 0, total: 1 << 30, count: 1}
var orinProps = fakeProps{name: "Fake Orin", integrated: true, cma: false, managed: true, canMap: true, major: 8, minor: 7, total: 1 << 30, count: 1}
var thorProps = fakeProps{name: "Fake Thor", integrated: true, cma: true, managed: true, canMap: true, major: 11, minor: 0, total: 1 << 30, count: 1}

func newFake(t *testing.T, p fakeProps) *fakeDriver {
	return &fakeDriver{
		t: t, props: p, next: 0x1000,
		regions: map[uintptr][]byte{}, kinds: map[uintptr]string{}, attach: map[uintptr]uint32{},
		streams: map[uintptr]*fakeStream{}, events: map[uintptr]*fakeStream{},
		kernels: map[string]func(*fakeDriver, *Args){}, modules: map[uintptr]bool{}, funcs: map[uintptr]string{},
		fail: map[string]Result{}, freeMem: p.total,
	}
}

func (f *fakeDriver) log(format string, a ...any) {
	if !f.quiet {
		f.calls = append(f.calls, fmt.Sprintf(format, a...))
	}
}

func (f *fakeDriver) failing(name string) error {
	if r, ok := f.fail[name]; ok {
		delete(f.fail, name)
		return call(name, r)
	}
	return nil
}

func (f *fakeDriver) handle() uintptr { f.next += 0x10; return f.next }

func (f *fakeDriver) checkCtx(ctx uintptr) error {
	if f.retained == 0 || ctx != 0xc0 {
		return call("cuCtxSetCurrent", 201)
	}
	return nil
}

// callsMatching returns logged calls with the prefix.
func (f *fakeDriver) callsMatching(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			out = append(out, c)
		}
	}
	return out
}

// finish completes the work on a stream (the kernel ends).
func (f *fakeDriver) finish(s *Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams[s.h].busy = false
}

// region finds the memory holding [addr, addr+n).
func (f *fakeDriver) region(addr uintptr, n int) []byte {
	for base, mem := range f.regions {
		if addr >= base && addr+uintptr(n) <= base+uintptr(len(mem)) {
			return mem[addr-base : addr-base+uintptr(n)]
		}
	}
	f.t.Errorf("fake driver: access to unmapped [%#x, +%d)", addr, n)
	return nil
}

func (f *fakeDriver) mmap(n int, kind string) (uintptr, []byte) {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		f.t.Fatalf("fake mmap: %v", err)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	f.regions[base], f.kinds[base] = mem, kind
	return base, mem
}

func (f *fakeDriver) unmap(base uintptr, kind string) error {
	mem, ok := f.regions[base]
	if !ok || f.kinds[base] != kind {
		return call("free", resultInvalidVal)
	}
	delete(f.regions, base)
	delete(f.kinds, base)
	delete(f.attach, base)
	if kind != "pinned" {
		f.freeMem += uint64(len(mem))
	}
	return unix.Munmap(mem)
}

func (f *fakeDriver) version() (int, error) { return 13000, nil }
func (f *fakeDriver) deviceCount() (int, error) {
	return f.props.count, nil
}
func (f *fakeDriver) deviceGet(o int) (int, error)         { return o, nil }
func (f *fakeDriver) deviceName(int) (string, error)       { return f.props.name, nil }
func (f *fakeDriver) deviceTotalMem(int) (uint64, error)   { return f.props.total, nil }
func (f *fakeDriver) primaryCtxSetFlags(int, uint32) error { return nil }
func (f *fakeDriver) deviceAttr(_, attr int) (int, error) {
	p := f.props
	m := map[int]int{
		attrIntegrated: b01(p.integrated), attrConcurrentManagedAccess: b01(p.cma), attrManagedMemory: b01(p.managed),
		attrCanMapHostMemory: b01(p.canMap), attrCCMajor: p.major, attrCCMinor: p.minor, attrUnifiedAddressing: 1,
		attrPageableMemoryAccess: 0, attrMultiprocessorCount: 8,
	}
	return m[attr], nil
}
func (f *fakeDriver) primaryCtxRetain(int) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retained++
	return 0xc0, nil
}
func (f *fakeDriver) primaryCtxRelease(int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retained--
	return nil
}
func (f *fakeDriver) ctxSetCurrent(ctx uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.current = ctx
	return nil
}
func (f *fakeDriver) ctxGetCurrent() (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current, nil
}
func (f *fakeDriver) memGetInfo(ctx uintptr) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.freeMem, f.props.total, f.checkCtx(ctx)
}
func (f *fakeDriver) memAlloc(ctx uintptr, n int) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkCtx(ctx); err != nil {
		return 0, err
	}
	if err := f.failing("cuMemAlloc_v2"); err != nil {
		return 0, err
	}
	base, _ := f.mmap(n, "device")
	f.freeMem -= uint64(n)
	if !f.quiet {
		f.log("alloc device %d", n)
	}
	return base, nil
}
func (f *fakeDriver) memAllocManaged(ctx uintptr, n int, flags uint32) (uintptr, unsafe.Pointer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkCtx(ctx); err != nil {
		return 0, nil, err
	}
	if err := f.failing("cuMemAllocManaged"); err != nil {
		return 0, nil, err
	}
	base, mem := f.mmap(n, "managed")
	f.freeMem -= uint64(n)
	f.attach[base] = flags
	if !f.quiet {
		f.log("alloc managed %d flags=%d", n, flags)
	}
	return base, unsafe.Pointer(&mem[0]), nil
}
func (f *fakeDriver) memFree(ctx, dptr uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkCtx(ctx); err != nil {
		return err
	}
	kind := f.kinds[dptr]
	if kind == "pinned" {
		kind = "not pinned"
	}
	if !f.quiet {
		f.log("free %s", kind)
	}
	return f.unmap(dptr, kind)
}
func (f *fakeDriver) memHostAlloc(ctx uintptr, n int, flags uint32) (unsafe.Pointer, uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkCtx(ctx); err != nil {
		return nil, 0, err
	}
	if flags != hostAllocPortable|hostAllocDeviceMap {
		f.t.Errorf("cuMemHostAlloc flags %d, want PORTABLE|DEVICEMAP", flags)
	}
	base, mem := f.mmap(n, "pinned")
	if !f.quiet {
		f.log("alloc pinned %d", n)
	}
	return unsafe.Pointer(&mem[0]), base, nil
}
func (f *fakeDriver) memFreeHost(ctx uintptr, p unsafe.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.quiet {
		f.log("free pinned")
	}
	return f.unmap(uintptr(p), "pinned")
}
func (f *fakeDriver) streamCreate(ctx uintptr, flags uint32) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.handle()
	f.streams[h] = &fakeStream{}
	return h, f.checkCtx(ctx)
}
func (f *fakeDriver) streamDestroy(ctx, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.streams[s]; !ok {
		return call("cuStreamDestroy_v2", 400)
	}
	delete(f.streams, s)
	return nil
}
func (f *fakeDriver) streamSynchronize(ctx, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failing("cuStreamSynchronize"); err != nil {
		return err
	}
	if s == 0 { // the context's default stream: waits for its copies
		return nil
	}
	st, ok := f.streams[s]
	if !ok {
		return call("cuStreamSynchronize", 400)
	}
	st.busy = false
	return nil
}
func (f *fakeDriver) streamQuery(ctx, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.streams[s]
	if !ok {
		return call("cuStreamQuery", 400)
	}
	if st.busy {
		return resultNotReady
	}
	return nil
}
func (f *fakeDriver) streamAttachMem(ctx, s, dptr uintptr, flags uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kinds[dptr] != "managed" {
		f.t.Errorf("cuStreamAttachMemAsync on %#x, which is not the base of a managed allocation", dptr)
	}
	f.attach[dptr] = flags
	if !f.quiet {
		f.log("attach flags=%d", flags)
	}
	return nil
}
func (f *fakeDriver) canPrefetch() bool { return !f.props.noPrefetch }
func (f *fakeDriver) prefetch(ctx, dptr uintptr, n int, dst int, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.quiet {
		f.log("prefetch dst=%d n=%d", dst, n)
	}
	if !f.props.cma && dst >= 0 {
		return call("cuMemPrefetchAsync", 101) // what Jetson answers
	}
	return nil
}
func (f *fakeDriver) memcpyHtoD(ctx, dst uintptr, src unsafe.Pointer, n int, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.region(dst, n), unsafe.Slice((*byte)(src), n))
	if !f.quiet {
		f.log("memcpy HtoD %d", n)
	}
	return nil
}
func (f *fakeDriver) memcpyDtoH(ctx uintptr, dst unsafe.Pointer, src uintptr, n int, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(unsafe.Slice((*byte)(dst), n), f.region(src, n))
	if !f.quiet {
		f.log("memcpy DtoH %d", n)
	}
	return nil
}
func (f *fakeDriver) memcpyDtoD(ctx, dst, src uintptr, n int, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.region(dst, n), f.region(src, n))
	if !f.quiet {
		f.log("memcpy DtoD %d", n)
	}
	return nil
}
func (f *fakeDriver) eventCreate(ctx uintptr, flags uint32) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.handle()
	f.events[h] = nil
	return h, nil
}
func (f *fakeDriver) eventDestroy(ctx, e uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.events, e)
	return nil
}
func (f *fakeDriver) eventRecord(ctx, e, s uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events[e] = f.streams[s]
	return nil
}
func (f *fakeDriver) eventSynchronize(ctx, e uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.events[e]; st != nil {
		st.busy = false
	}
	return nil
}
func (f *fakeDriver) eventQuery(ctx, e uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.events[e]; st != nil && st.busy {
		return resultNotReady
	}
	return nil
}
func (f *fakeDriver) eventElapsed(ctx, a, b uintptr) (float32, error) { return 1, nil }
func (f *fakeDriver) moduleLoad(ctx uintptr, image []byte) (uintptr, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(image) == 0 || image[len(image)-1] != 0 {
		return 0, "ptxas fatal: image not NUL-terminated", call("cuModuleLoadDataEx", 218)
	}
	h := f.handle()
	f.modules[h] = true
	return h, "", nil
}
func (f *fakeDriver) moduleUnload(ctx, m uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.modules, m)
	return nil
}
func (f *fakeDriver) moduleFunction(ctx, m uintptr, name string) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.kernels[name]; !ok {
		return 0, call("cuModuleGetFunction", 500)
	}
	h := f.handle()
	f.funcs[h] = name
	return h, nil
}
func (f *fakeDriver) launch(ctx, fn uintptr, grid, block Dim3, shmem uint32, s uintptr, a *Args) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkCtx(ctx); err != nil {
		return err
	}
	st, ok := f.streams[s]
	if !ok {
		return call("cuLaunchKernel", 400)
	}
	k := f.kernels[f.funcs[fn]]
	k(f, a)
	st.busy = true // until finish or synchronize
	if !f.quiet {
		f.log("launch %s", f.funcs[fn])
	}
	return nil
}
func (f *fakeDriver) errorText(r Result) (string, bool) { return "", false }

// arg reads the i-th 8-byte argument.
func (a *Args) arg64(i int) uint64 {
	b := (*[maxArgBytes]byte)(ptrOf(&a.blob))
	return binary.NativeEndian.Uint64(b[a.off[i]:])
}

// fakeSumKernel models sum_u32(const unsigned* p, size_t nwords, unsigned long long* out).
func fakeSumKernel(f *fakeDriver, a *Args) {
	p, n, out := uintptr(a.arg64(0)), int(a.arg64(1)), uintptr(a.arg64(2))
	src := f.region(p, n*4)
	var sum uint64
	for i := 0; i < n; i++ {
		sum += uint64(binary.NativeEndian.Uint32(src[i*4:]))
	}
	binary.NativeEndian.PutUint64(f.region(out, 8), sum)
}
