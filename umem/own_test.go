package umem

import (
	"errors"
	"slices"
	"testing"
)

func openFake(t *testing.T, p fakeProps, strict bool) (*Device, *fakeDriver) {
	t.Helper()
	f := newFake(t, p)
	d, err := openDevice(f, DeviceOptions{Strict: strict})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	f.kernels["sum_u32"] = fakeSumKernel
	f.kernels["busy"] = func(*fakeDriver, *Args) {}
	return d, f
}

// busy launches a kernel that keeps s busy until f.finish(s).
func busy(t *testing.T, d *Device, s *Stream) {
	t.Helper()
	m, err := d.LoadModule([]byte("fake"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel("busy")
	if err != nil {
		t.Fatal(err)
	}
	var a Args
	if err := k.Launch(s, D1(1), D1(1), 0, &a); err != nil {
		t.Fatal(err)
	}
}

func mustStream(t testing.TB, d *Device) *Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func hostOK(t *testing.T, what string, m *Mem) []byte {
	t.Helper()
	b, err := m.Host()
	if err != nil {
		t.Fatalf("%s: Host() = %v, want host access", what, err)
	}
	if len(b) != m.Len() {
		t.Fatalf("%s: Host() has %d bytes, want %d", what, len(b), m.Len())
	}
	return b
}

// The concurrentManagedAccess = 0 discipline, on a Jetson-like device and,
// in strict mode, on a discrete one.
func TestOwnershipCMA0(t *testing.T) {
	for _, c := range []struct {
		name   string
		props  fakeProps
		strict bool
	}{{"orin", orinProps, false}, {"discrete-strict", discreteProps, true}, {"thor-strict", thorProps, true}} {
		t.Run(c.name, func(t *testing.T) {
			d, f := openFake(t, c.props, c.strict)
			if !d.Strict() {
				t.Fatal("Device.Strict() = false")
			}
			s1, s2 := mustStream(t, d), mustStream(t, d)
			m, err := d.Alloc(5000, MemOptions{Kind: KindManaged, Prefetch: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.callsMatching("alloc managed"); len(got) != 1 || got[0] != "alloc managed 12288 flags=2" {
				t.Fatalf("managed alloc = %q, want one attach-HOST (flags=2) allocation rounded to pages plus alignment", got)
			}
			if m.Device()%PageSize != 0 {
				t.Errorf("device address %#x not page-aligned", m.Device())
			}
			hostOK(t, "fresh attach-HOST buffer", m)

			// host -> s1: attach SINGLE, host access refused.
			if err := m.Attach(s1); err != nil {
				t.Fatal(err)
			}
			if m.Owner() != s1 {
				t.Fatal("Owner() is not s1 after Attach")
			}
			_, err = m.Host()
			wantErr(t, "Host while attached", err, ErrOwnedByStream)
			wantErr(t, "Attach to a second stream", m.Attach(s2), ErrOwnedByStream)
			if err := m.Detach(s2); err == nil {
				t.Fatal("Detach from a stream that does not own the buffer succeeded")
			}
			busy(t, d, s1)

			// s1 -> host: attach HOST, enqueued; host access once s1 is idle.
			if err := m.Detach(s1); err != nil {
				t.Fatal(err)
			}
			_, err = m.Host()
			wantErr(t, "Host while the detach is pending", err, ErrOwnedByStream)
			wantErr(t, "Attach to s2 while returning on busy s1", m.Attach(s2), ErrOwnedByStream)
			f.finish(s1)
			hostOK(t, "after s1 finished", m)

			// A host-attached buffer may be used while another stream works.
			if err := m.Attach(s2); err != nil {
				t.Fatal(err)
			}
			if err := m.Detach(s2); err != nil {
				t.Fatal(err)
			}
			if err := s2.Synchronize(); err != nil {
				t.Fatal(err)
			}
			busy(t, d, s1)
			hostOK(t, "host-attached buffer while s1 runs", m)

			// A globally attached buffer may not: the GPU is active.
			g, err := d.Alloc(100, MemOptions{Kind: KindManaged, Global: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.Host()
			wantErr(t, "Host of a GLOBAL buffer while s1 runs", err, ErrGPUActive)
			wantErr(t, "same, as ownership", err, ErrOwnedByStream)
			f.finish(s1)
			hostOK(t, "GLOBAL buffer with the GPU idle", g)

			want := []string{"attach flags=4", "attach flags=2", "attach flags=4", "attach flags=2"}
			if got := f.callsMatching("attach"); !slices.Equal(got, want) {
				t.Errorf("attach calls = %q, want %q", got, want)
			}
			if got := f.callsMatching("prefetch"); len(got) != 0 {
				t.Errorf("prefetch issued under the concurrentManagedAccess = 0 rules: %q", got)
			}
			st := d.Stats()
			if st.Attaches != 2 || st.Detaches != 2 || st.Prefetches != 0 || st.HostDenied != 3 || st.Buffers != 2 {
				t.Errorf("stats = %+v", st)
			}
			for _, b := range []*Mem{m, g} {
				if err := b.Release(); err != nil {
					t.Fatal(err)
				}
				if err := b.Release(); err != nil {
					t.Fatalf("second Release: %v", err)
				}
				_, err := b.Host()
				wantErr(t, "Host after Release", err, ErrReleased)
				wantErr(t, "Attach after Release", b.Attach(s1), ErrReleased)
			}
			if st := d.Stats(); st.Buffers != 0 || st.Bytes != 0 {
				t.Errorf("after Release: %+v", st)
			}
		})
	}
}

// Where concurrentManagedAccess = 1 the transitions prefetch instead.
func TestOwnershipCMA1Prefetch(t *testing.T) {
	d, f := openFake(t, discreteProps, false)
	s := mustStream(t, d)
	m, err := d.Alloc(8192, MemOptions{Kind: KindManaged, Prefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.callsMatching("alloc managed"); len(got) != 1 || got[0] != "alloc managed 12288 flags=1" {
		t.Fatalf("managed alloc = %q, want attach-GLOBAL", got)
	}
	if err := m.Attach(s); err != nil {
		t.Fatal(err)
	}
	_, err = m.Host()
	wantErr(t, "Host while a stream owns it", err, ErrOwnedByStream)
	busy(t, d, s)
	if err := m.Detach(s); err != nil {
		t.Fatal(err)
	}
	f.finish(s)
	hostOK(t, "after detach", m)
	want := []string{"prefetch dst=0 n=8192", "prefetch dst=-1 n=8192"}
	if got := f.callsMatching("prefetch"); !slices.Equal(got, want) {
		t.Errorf("prefetch calls = %q, want %q", got, want)
	}
	if got := f.callsMatching("attach"); len(got) != 0 {
		t.Errorf("stream attach calls on a concurrentManagedAccess = 1 device: %q", got)
	}
	// GLOBAL memory is fine while another stream runs on such a device.
	s2 := mustStream(t, d)
	busy(t, d, s2)
	hostOK(t, "GLOBAL buffer while s2 runs, CMA=1", m)
	f.finish(s2)
	m.Release()

	// No prefetch entry point: Attach fails with ErrNotSupported.
	f.props.noPrefetch = true
	m2, err := d.Alloc(100, MemOptions{Kind: KindManaged, Prefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Attach without prefetch symbols", m2.Attach(s), ErrNotSupported)
	m2.Release()
}

func TestOwnershipOtherKinds(t *testing.T) {
	d, f := openFake(t, orinProps, false)
	s := mustStream(t, d)
	dev, err := d.Alloc(3000, MemOptions{Kind: KindDevice})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dev.Host()
	wantErr(t, "Host of device memory", err, ErrNotHostAccessible)
	if dev.Device() == 0 || dev.Device()%PageSize != 0 {
		t.Errorf("device address %#x", dev.Device())
	}
	pin, err := d.Alloc(3000, MemOptions{Kind: KindPinned})
	if err != nil {
		t.Fatal(err)
	}
	b := hostOK(t, "pinned", pin)
	for i := range b {
		b[i] = byte(i)
	}
	if err := pin.Attach(s); err != nil {
		t.Fatal(err)
	}
	_, err = pin.Host()
	wantErr(t, "Host of pinned memory owned by a stream", err, ErrOwnedByStream)
	if err := s.Copy(dev, pin, 3000); err != nil {
		t.Fatal(err)
	}
	// Release of a buffer a stream still owns waits for the stream.
	busy(t, d, s)
	if err := pin.Release(); err != nil {
		t.Fatal(err)
	}
	if done, _ := s.Query(); !done {
		t.Error("Release of memory a stream still owns did not wait for the stream")
	}
	if err := dev.Release(); err != nil {
		t.Fatal(err)
	}
	if got := f.callsMatching("memcpy"); !slices.Equal(got, []string{"memcpy HtoD 3000"}) {
		t.Errorf("copies = %q", got)
	}
	if got := f.callsMatching("free"); !slices.Equal(got, []string{"free pinned", "free device"}) {
		t.Errorf("frees = %q", got)
	}
	// Copy of host-accessible CUDA memory the stream does not own is refused.
	m, _ := d.Alloc(10, MemOptions{Kind: KindManaged})
	dst, _ := d.Alloc(10, MemOptions{Kind: KindDevice})
	if err := s.Copy(dst, m, 10); err == nil {
		t.Error("Copy from a managed buffer the stream does not own succeeded")
	}
	if err := s.Copy(dst, m, 11); err == nil {
		t.Error("Copy longer than the buffers succeeded")
	}
	m.Release()
	dst.Release()
}

func TestMappedNeedsCanMap(t *testing.T) {
	p := discreteProps
	p.canMap, p.managed = false, false
	d, _ := openFake(t, p, false)
	_, err := d.Alloc(10, MemOptions{Kind: KindMapped})
	wantErr(t, "mapped without canMapHostMemory", err, ErrNotSupported)
	_, err = d.Alloc(10, MemOptions{Kind: KindManaged})
	wantErr(t, "managed without managedMemory", err, ErrNotSupported)
	if _, err := d.Alloc(0, MemOptions{Kind: KindDevice}); err == nil {
		t.Error("zero-size alloc succeeded")
	}
	if _, err := d.Alloc(10, MemOptions{Kind: KindHost}); err == nil {
		t.Error("host kind from a CUDA device succeeded")
	}
}

func TestDeviceErrors(t *testing.T) {
	f := newFake(t, discreteProps)
	if _, err := openDevice(f, DeviceOptions{Ordinal: 1}); err == nil || errors.Is(err, ErrNoCUDA) {
		t.Errorf("ordinal 1 of 1 device: %v, want a configuration error, not ErrNoCUDA", err)
	}
	p := discreteProps
	p.count = 0
	if _, err := openDevice(newFake(t, p), DeviceOptions{}); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("no device: %v, want ErrNoCUDA", err)
	}
	d, f := openFake(t, discreteProps, false)
	f.fail["cuMemAlloc_v2"] = 2
	_, err := d.Alloc(1<<20, MemOptions{Kind: KindDevice})
	wantErr(t, "failed alloc", err, ErrOutOfMemory)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if f.retained != 0 {
		t.Errorf("primary context retained %d times after Close", f.retained)
	}
	_, err = d.NewStream()
	wantErr(t, "NewStream after Close", err, ErrClosed)
}

func TestIntegratedProbeReadsMeminfo(t *testing.T) {
	f := newFake(t, orinProps)
	d, err := openDevice(f, DeviceOptions{ProcRoot: "testdata/meminfo-root"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := d.Probe()
	if p.MemAvailable != 0 || p.MeminfoErr == "" {
		t.Errorf("missing meminfo: %+v", p)
	}
	d2, err := openDevice(f, DeviceOptions{ProcRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if d2.Probe().MeminfoErr == "" {
		t.Error("MeminfoErr empty for a root without meminfo")
	}
}
