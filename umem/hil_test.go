//go:build hil

package umem

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Hardware-in-the-loop tests for a Jetson with concurrentManagedAccess = 0
// (Xavier, Orin). Build with -tags hil; see docs/HIL.md. On other
// GPUs they skip, unless EDGED_HIL_STRICT=1 runs them in strict mode (the
// same discipline, enforced by umem instead of required by the device).

func hilDevice(t *testing.T) *Device {
	t.Helper()
	strict := os.Getenv("EDGED_HIL_STRICT") == "1"
	d := gpuDevice(t, DeviceOptions{Strict: strict})
	p := d.Probe()
	t.Logf("probe:\n%s", p)
	if p.ConcurrentManagedAccess && !strict {
		t.Skipf("%s has concurrentManagedAccess = 1; these tests are for Xavier/Orin (or set EDGED_HIL_STRICT=1)", p.Name)
	}
	return d
}

// The CPU writes managed attach-HOST buffers (capture) while a kernel runs
// on another stream over another managed buffer (inference). On Xavier/Orin
// this is exactly what faults when the buffers are attached GLOBAL.
func TestHILCaptureWhileKernelRuns(t *testing.T) {
	d := hilDevice(t)
	m := testModule(t, d)
	spin, err := m.Kernel("spin_until")
	if err != nil {
		t.Fatal(err)
	}
	sr := testSumRunner(t, d, m)
	infer, other := mustStream(t, d), mustStream(t, d)
	const n = 1920 * 1080 * 2
	capture, err := d.Alloc(n, MemOptions{Kind: KindManaged})
	if err != nil {
		t.Fatal(err)
	}
	defer capture.Release()
	work, err := d.Alloc(n, MemOptions{Kind: KindManaged})
	if err != nil {
		t.Fatal(err)
	}
	defer work.Release()
	flag, _ := d.Alloc(4, MemOptions{Kind: KindMapped})
	out, _ := d.Alloc(4, MemOptions{Kind: KindMapped})
	defer flag.Release()
	defer out.Release()

	wb := hostOK(t, "work", work)
	fillRandom(wb, 1)
	wantWork := checksumU32(wb)
	if err := work.Attach(infer); err != nil {
		t.Fatal(err)
	}
	if err := sr.run(infer, work.Device(), n); err != nil {
		t.Fatal(err)
	}
	flag.Attach(infer)
	out.Attach(infer)
	flagWord := (*uint32)(flag.hostPtr())
	atomic.StoreUint32(flagWord, 0)
	var a Args
	a.Ptr(flag.Device())
	a.U64(uint64(60 * time.Second))
	a.Ptr(out.Device())
	if err := spin.Launch(infer, D1(1), D1(1), 0, &a); err != nil {
		t.Fatal(err)
	}
	// The kernel is running: capture 100 frames into the host buffer.
	var last uint64
	for i := range 100 {
		b, err := capture.Host()
		if err != nil {
			atomic.StoreUint32(flagWord, 1)
			t.Fatalf("frame %d: Host of an attach-HOST buffer while a kernel runs: %v", i, err)
		}
		fillRandom(b, uint64(100+i))
		last = checksumU32(b)
	}
	if done, _ := infer.Query(); done {
		t.Error("the kernel ended before the captures; the test proved nothing (raise the timeout?)")
	}
	atomic.StoreUint32(flagWord, 1)
	if err := work.Detach(infer); err != nil {
		t.Fatal(err)
	}
	if err := infer.Synchronize(); err != nil {
		t.Fatal(err)
	}
	flag.Detach(infer)
	out.Detach(infer)
	if got := atomic.LoadUint32((*uint32)(out.hostPtr())); got != 1 {
		t.Fatalf("spin kernel ended with %d, want 1", got)
	}
	if got, err := sr.result(); err != nil || got != wantWork {
		t.Fatalf("inference buffer checksum %d, %v; want %d", got, err, wantWork)
	}
	// The last captured frame reaches the GPU intact.
	if err := capture.Attach(other); err != nil {
		t.Fatal(err)
	}
	if err := sr.run(other, capture.Device(), n); err != nil {
		t.Fatal(err)
	}
	capture.Detach(other)
	if err := other.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got, err := sr.result(); err != nil || got != last {
		t.Fatalf("captured frame checksum %d, %v; want %d", got, err, last)
	}
}

// 1000 attach/detach cycles over two buffers and two streams, each frame
// verified, no prefetch issued.
func TestHILAttachDetachCycles(t *testing.T) {
	d := hilDevice(t)
	sr := testSumRunner(t, d, testModule(t, d))
	streams := [2]*Stream{mustStream(t, d), mustStream(t, d)}
	const n = 640 * 480 * 2
	var bufs [2]*Mem
	for i := range bufs {
		m, err := d.Alloc(n, MemOptions{Kind: KindManaged, Prefetch: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Release()
		bufs[i] = m
	}
	for i := range 1000 {
		m, s := bufs[i%2], streams[(i/2)%2]
		b := hostOK(t, "managed", m)
		fillRandom(b, uint64(i))
		want := checksumU32(b)
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
		if got, err := sr.result(); err != nil || got != want {
			t.Fatalf("cycle %d: checksum %d, %v; want %d", i, got, err, want)
		}
	}
	if st := d.Stats(); st.Prefetches != 0 || st.Attaches < 2000 {
		t.Errorf("stats %+v: want no prefetch and every attach counted", st)
	}
}

// auto on a Jetson picks managed attach-HOST without prefetch, and frames
// flow through the pool.
func TestHILAutoPlacement(t *testing.T) {
	strict := os.Getenv("EDGED_HIL_STRICT") == "1"
	o := Options{Strict: strict}
	if strict {
		o.Strategy = StrategyManaged // a discrete GPU's auto is pinned
	}
	p := gpuPlacement(t, o)
	if p.Probe.ConcurrentManagedAccess && !strict {
		t.Skip("not a concurrentManagedAccess = 0 device")
	}
	if p.Strategy != StrategyManaged || !strings.Contains(p.Reason, "no prefetch") {
		t.Fatalf("placement %s: %s", p.Strategy, p.Reason)
	}
	t.Log(p.Reason)
	d := p.Device
	s := mustStream(t, d)
	sr := testSumRunner(t, d, testModule(t, d))
	const n = 1920 * 1080 * 2
	pool, err := NewPool(p.Alloc, 4, n)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	up, err := p.NewUploader(s, n)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	src := make([]byte, n)
	for i := range 200 {
		fillRandom(src, uint64(i))
		if err := frameCycle(pool, up, sr, s, src, checksumU32(src)); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if st := d.Stats(); st.Prefetches != 0 {
		t.Errorf("%d prefetches", st.Prefetches)
	}
}
