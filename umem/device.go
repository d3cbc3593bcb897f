package umem

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// DeviceOptions configure OpenDevice.
type DeviceOptions struct {
	// Ordinal is the CUDA device number ([gpu] device).
	Ordinal int
	// Strict enforces the concurrentManagedAccess = 0 rules (Jetson
	// Xavier/Orin) on any device: managed buffers are attached to one
	// stream for GPU work and back to the host afterwards, never
	// prefetched, and host access is refused while the GPU may touch them.
	// It lets the discipline be tested on machines that do not need it.
	Strict bool
	// BlockingSync makes waits on the primary context sleep instead of
	// spin (CU_CTX_SCHED_BLOCKING_SYNC). It only takes effect when this
	// process has not used the device yet.
	BlockingSync bool
	// ProcRoot is where meminfo is read on integrated devices; "" means /proc.
	ProcRoot string
}

// Device is one CUDA device with its primary context retained. It is safe
// for concurrent use: every call makes the primary context current on the
// calling OS thread. Close releases the context; buffers, streams and
// modules must be released before.
type Device struct {
	drv   driver
	opts  DeviceOptions
	dev   int
	ctx   uintptr
	probe Probe
	// cmaRules is true when the concurrentManagedAccess = 0 rules apply:
	// the device has CMA = 0, or strict mode.
	cmaRules bool

	closed atomic.Bool

	mu      sync.Mutex // guards streams
	streams []*Stream

	stats struct {
		buffers, bytes                             atomic.Int64
		attaches, detaches, prefetches, hostDenied atomic.Uint64
	}
}

// DeviceStats are counters for metrics.
type DeviceStats struct {
	Buffers    int64  // live buffers allocated from the device
	Bytes      int64  // their total size
	Attaches   uint64 // host -> stream transitions
	Detaches   uint64 // stream -> host transitions
	Prefetches uint64 // prefetch calls issued
	HostDenied uint64 // Host() calls refused because the GPU owned the buffer
}

// OpenDevice loads the CUDA driver, retains the primary context of device
// o.Ordinal and probes it. Without a usable driver or device the error
// wraps ErrNoCUDA.
func OpenDevice(o DeviceOptions) (*Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	return openDevice(drv, o)
}

// ProbeDevice opens device o.Ordinal, reads its properties and closes it
// again. Without CUDA it returns a Probe whose String says why, and an
// error wrapping ErrNoCUDA.
func ProbeDevice(o DeviceOptions) (Probe, error) {
	d, err := OpenDevice(o)
	if err != nil {
		return Probe{NoCUDA: err.Error(), Ordinal: o.Ordinal}, err
	}
	p := d.Probe()
	return p, d.Close()
}

func openDevice(drv driver, o DeviceOptions) (*Device, error) {
	ver, err := drv.version()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCUDA, err)
	}
	n, err := drv.deviceCount()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCUDA, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the driver (CUDA %d.%d) sees no device", ErrNoCUDA, ver/1000, ver%1000/10)
	}
	if o.Ordinal < 0 || o.Ordinal >= n {
		return nil, fmt.Errorf("umem: CUDA device %d does not exist: this machine has %d (0..%d); set [gpu] device", o.Ordinal, n, n-1)
	}
	dev, err := drv.deviceGet(o.Ordinal)
	if err != nil {
		return nil, err
	}
	p := Probe{CUDA: true, DriverVersion: ver, Ordinal: o.Ordinal}
	if p.Name, err = drv.deviceName(dev); err != nil {
		return nil, err
	}
	attrs := []struct {
		attr int
		i    *int
		b    *bool
	}{
		{attr: attrCCMajor, i: &p.Major},
		{attr: attrCCMinor, i: &p.Minor},
		{attr: attrMultiprocessorCount, i: &p.Multiprocs},
		{attr: attrIntegrated, b: &p.Integrated},
		{attr: attrConcurrentManagedAccess, b: &p.ConcurrentManagedAccess},
		{attr: attrPageableMemoryAccess, b: &p.PageableMemoryAccess},
		{attr: attrManagedMemory, b: &p.ManagedMemory},
		{attr: attrCanMapHostMemory, b: &p.CanMapHostMemory},
		{attr: attrUnifiedAddressing, b: &p.UnifiedAddressing},
	}
	for _, a := range attrs {
		v, err := drv.deviceAttr(dev, a.attr)
		if err != nil {
			return nil, fmt.Errorf("umem: device %d attribute %d: %w", o.Ordinal, a.attr, err)
		}
		if a.i != nil {
			*a.i = v
		} else {
			*a.b = v != 0
		}
	}
	if p.TotalMem, err = drv.deviceTotalMem(dev); err != nil {
		return nil, err
	}
	if o.BlockingSync {
		if err := drv.primaryCtxSetFlags(dev, ctxSchedBlockingSync); err != nil {
			return nil, fmt.Errorf("umem: device %d: blocking sync: %w", o.Ordinal, err)
		}
	}
	ctx, err := drv.primaryCtxRetain(dev)
	if err != nil {
		return nil, fmt.Errorf("umem: device %d (%s): retain primary context: %w", o.Ordinal, p.Name, err)
	}
	d := &Device{drv: drv, opts: o, dev: dev, ctx: ctx}
	if p.FreeMem, _, err = drv.memGetInfo(ctx); err != nil {
		drv.primaryCtxRelease(dev)
		return nil, err
	}
	if p.Integrated {
		if mi, err := ReadMeminfo(o.ProcRoot); err != nil {
			p.MeminfoErr = err.Error()
		} else {
			p.MemAvailable = mi.MemAvailable
		}
	}
	d.probe = p
	d.cmaRules = o.Strict || !p.ConcurrentManagedAccess
	return d, nil
}

// Probe returns what OpenDevice found.
func (d *Device) Probe() Probe { return d.probe }

// Strict reports whether the concurrentManagedAccess = 0 rules are enforced
// (by strict mode or because the device needs them).
func (d *Device) Strict() bool { return d.cmaRules }

// Context is the CUcontext handle of the primary context, for libraries
// (TensorRT through cudart) that must run in the same context.
func (d *Device) Context() uintptr { return d.ctx }

// MemInfo returns free and total device memory (cuMemGetInfo).
func (d *Device) MemInfo() (free, total uint64, err error) {
	if d.closed.Load() {
		return 0, 0, ErrClosed
	}
	return d.drv.memGetInfo(d.ctx)
}

// Stats returns counters for metrics.
func (d *Device) Stats() DeviceStats {
	return DeviceStats{
		Buffers:    d.stats.buffers.Load(),
		Bytes:      d.stats.bytes.Load(),
		Attaches:   d.stats.attaches.Load(),
		Detaches:   d.stats.detaches.Load(),
		Prefetches: d.stats.prefetches.Load(),
		HostDenied: d.stats.hostDenied.Load(),
	}
}

// Close releases the primary context. It is idempotent.
func (d *Device) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.mu.Lock()
	streams := append([]*Stream(nil), d.streams...)
	d.mu.Unlock()
	var errs []error
	for _, s := range streams {
		errs = append(errs, s.Close())
	}
	errs = append(errs, d.drv.primaryCtxRelease(d.dev))
	return errors.Join(errs...)
}

func (d *Device) addStream(s *Stream) {
	d.mu.Lock()
	d.streams = append(d.streams, s)
	d.mu.Unlock()
}

func (d *Device) removeStream(s *Stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, x := range d.streams {
		if x == s {
			d.streams = append(d.streams[:i], d.streams[i+1:]...)
			return
		}
	}
}

// anyStreamBusy reports whether any stream of the device has unfinished
// work: the test for "the GPU is active" of the concurrentManagedAccess = 0
// rules. Work must be issued on umem streams for this to see it.
func (d *Device) anyStreamBusy() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.streams {
		done, err := s.query()
		if err != nil {
			return false, err
		}
		if !done {
			return true, nil
		}
	}
	return false, nil
}

func (d *Device) prefetch(dptr uintptr, n int, toGPU bool, s *Stream) error {
	if !d.drv.canPrefetch() {
		return fmt.Errorf("%w: the driver exports neither cuMemPrefetchAsync_v2 nor cuMemPrefetchAsync", ErrNotSupported)
	}
	dst := -1
	if toGPU {
		dst = d.dev
	}
	d.stats.prefetches.Add(1)
	return d.drv.prefetch(d.ctx, dptr, n, dst, s.h)
}
