package umem

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// MemOptions choose the kind of a CUDA buffer.
type MemOptions struct {
	// Kind is KindManaged, KindPinned, KindMapped or KindDevice.
	Kind Kind
	// Global allocates managed memory attach-GLOBAL. By default managed
	// memory is allocated attach-HOST where the concurrentManagedAccess = 0
	// rules apply (so a fresh buffer is not visible to running kernels)
	// and attach-GLOBAL elsewhere.
	Global bool
	// Prefetch moves managed memory to the GPU on Attach and back to the
	// CPU on Detach. It is ignored where the concurrentManagedAccess = 0
	// rules apply: prefetching is not supported there.
	Prefetch bool
}

// attachment is the stream association of managed memory as last enqueued.
type attachment uint8

const (
	attachNone   attachment = iota // not managed memory
	attachGlobal                   // visible to every stream
	attachHost                     // visible to the host only
	attachSingle                   // visible to the owning stream only
)

// Mem is a buffer of CUDA memory: managed, pinned (also used as mapped
// zero-copy memory) or device memory.
//
// Mem has an owner: the host, or one stream between Attach and Detach.
// Host fails with ErrOwnedByStream while a stream owns the buffer, and
// until the stream that it was detached on has finished its work. Where
// the concurrentManagedAccess = 0 rules apply (Jetson Xavier/Orin, or
// strict mode), managed memory is attached to its stream alone for GPU
// work (cuStreamAttachMemAsync SINGLE) and to the host after it (HOST),
// and Host of a globally attached buffer fails with ErrGPUActive while any
// stream of the device has unfinished work. Where concurrentManagedAccess
// = 1 the transitions prefetch instead when MemOptions.Prefetch is set.
//
// The slice Host returns is valid until the next Attach; keeping it
// across GPU work defeats these checks.
type Mem struct {
	d        *Device
	kind     Kind
	n        int            // usable length
	size     int            // allocated length
	base     uintptr        // device address of the allocation (what cuMemFree takes)
	dptr     uintptr        // device address of the usable, page-aligned start
	host     unsafe.Pointer // host address of the usable start; nil for device memory
	hostBase unsafe.Pointer // pinned: what cuMemFreeHost takes
	prefetch bool

	mu        sync.Mutex
	attach    attachment
	owner     *Stream // nil: the host owns the buffer
	returning *Stream // detached on this stream; host access once it is idle
	released  bool
}

var _ Buffer = (*Mem)(nil)

// gpuActiveError matches both ErrGPUActive and ErrOwnedByStream.
type gpuActiveError struct{}

func (gpuActiveError) Error() string { return ErrGPUActive.Error() }
func (gpuActiveError) Is(t error) bool {
	return t == ErrGPUActive || t == ErrOwnedByStream
}

var errGPUActive error = gpuActiveError{}

// Alloc allocates n bytes of CUDA memory. The start is page-aligned.
func (d *Device) Alloc(n int, o MemOptions) (*Mem, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if n <= 0 {
		return nil, fmt.Errorf("umem: %s alloc of %d bytes: size must be positive", o.Kind, n)
	}
	m := &Mem{d: d, kind: o.Kind, n: n}
	switch o.Kind {
	case KindManaged:
		if !d.probe.ManagedMemory {
			return nil, fmt.Errorf("%w: device %d (%s) has no managed memory; use [gpu] memory = \"pinned\"", ErrNotSupported, d.probe.Ordinal, d.probe.Name)
		}
		flags := uint32(memAttachGlobal)
		m.attach = attachGlobal
		if d.cmaRules && !o.Global {
			flags, m.attach = memAttachHost, attachHost
		}
		m.prefetch = o.Prefetch && !d.cmaRules
		m.size = roundUp(n, PageSize) + PageSize
		base, host, err := d.drv.memAllocManaged(d.ctx, m.size, flags)
		if err != nil {
			return nil, fmt.Errorf("umem: managed alloc of %d bytes on device %d: %w", n, d.probe.Ordinal, err)
		}
		off := alignOff(base)
		m.base, m.dptr, m.host = base, base+off, unsafe.Add(host, off)
	case KindPinned, KindMapped:
		if o.Kind == KindMapped && !d.probe.CanMapHostMemory {
			return nil, fmt.Errorf("%w: device %d (%s) cannot map host memory; use [gpu] memory = \"pinned\"", ErrNotSupported, d.probe.Ordinal, d.probe.Name)
		}
		m.size = roundUp(n, PageSize)
		host, dptr, err := d.drv.memHostAlloc(d.ctx, m.size, hostAllocPortable|hostAllocDeviceMap)
		if err != nil {
			return nil, fmt.Errorf("umem: pinned alloc of %d bytes: %w", n, err)
		}
		if uintptr(host)%PageSize != 0 {
			d.drv.memFreeHost(d.ctx, host)
			return nil, fmt.Errorf("umem: pinned alloc of %d bytes: the driver returned an address that is not page-aligned", n)
		}
		m.hostBase, m.host, m.base, m.dptr = host, host, dptr, dptr
	case KindDevice:
		m.size = roundUp(n, PageSize) + PageSize
		base, err := d.drv.memAlloc(d.ctx, m.size)
		if err != nil {
			return nil, fmt.Errorf("umem: device alloc of %d bytes on device %d: %w", n, d.probe.Ordinal, err)
		}
		m.base, m.dptr = base, base+alignOff(base)
	default:
		return nil, fmt.Errorf("umem: cannot allocate %s memory from a CUDA device", o.Kind)
	}
	d.stats.buffers.Add(1)
	d.stats.bytes.Add(int64(m.size))
	return m, nil
}

func alignOff(p uintptr) uintptr { return uintptr(roundUp(int(p%PageSize), PageSize)) - p%PageSize }

// Kind implements Buffer.
func (m *Mem) Kind() Kind { return m.kind }

// Len implements Buffer.
func (m *Mem) Len() int { return m.n }

// Device implements Buffer: the address kernels use; 0 after Release.
func (m *Mem) Device() uintptr {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return 0
	}
	return m.dptr
}

// Host implements Buffer. See the type's documentation for when it fails.
func (m *Mem) Host() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return nil, ErrReleased
	}
	if m.host == nil {
		return nil, ErrNotHostAccessible
	}
	if err := m.hostAccessLocked(); err != nil {
		if errors.Is(err, ErrOwnedByStream) {
			m.d.stats.hostDenied.Add(1)
		}
		return nil, err
	}
	return unsafe.Slice((*byte)(m.host), m.n), nil
}

func (m *Mem) hostAccessLocked() error {
	if m.owner != nil {
		return ErrOwnedByStream
	}
	if r := m.returning; r != nil {
		done, err := r.query()
		if err != nil {
			return err
		}
		if !done {
			return ErrOwnedByStream
		}
		m.returning = nil
	}
	if m.attach == attachGlobal && m.d.cmaRules {
		busy, err := m.d.anyStreamBusy()
		if err != nil {
			return err
		}
		if busy {
			return errGPUActive
		}
	}
	return nil
}

// Owner is the stream that owns the buffer, or nil when the host does
// (possibly once a pending Detach completes).
func (m *Mem) Owner() *Stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner
}

// Attach hands the buffer from the host to stream s before GPU work on s:
// managed memory is attached to s alone where the concurrentManagedAccess
// = 0 rules apply, or prefetched to the GPU where it is 1 and prefetching
// was asked for. Attaching to the stream that already owns it does nothing.
func (m *Mem) Attach(s *Stream) error {
	if s == nil || s.d != m.d {
		return fmt.Errorf("umem: Attach: the stream is nil or of another device")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return ErrReleased
	}
	if m.owner == s {
		return nil
	}
	if m.owner != nil {
		return fmt.Errorf("%w: Attach while another stream owns the buffer; Detach it there first", ErrOwnedByStream)
	}
	if r := m.returning; r != nil && r != s {
		// The buffer is still being handed back on another stream.
		done, err := r.query()
		if err != nil {
			return err
		}
		if !done {
			return fmt.Errorf("%w: Attach while the buffer is still being returned on another stream; Synchronize it first", ErrOwnedByStream)
		}
	}
	if m.kind == KindManaged {
		if m.d.cmaRules {
			if m.attach != attachSingle {
				if err := m.d.drv.streamAttachMem(m.d.ctx, s.h, m.base, memAttachSingle); err != nil {
					return fmt.Errorf("umem: attach managed buffer to stream: %w", err)
				}
				m.attach = attachSingle
			}
		} else if m.prefetch {
			if err := m.d.prefetch(m.dptr, m.n, true, s); err != nil {
				return fmt.Errorf("umem: prefetch managed buffer to the GPU: %w", err)
			}
		}
	}
	m.returning = nil
	m.owner = s
	m.d.stats.attaches.Add(1)
	return nil
}

// Detach hands the buffer back to the host after the work enqueued on s so
// far: managed memory is attached to the host (concurrentManagedAccess = 0
// rules) or prefetched to the CPU (prefetch asked for). It does not wait;
// Host succeeds once s has no unfinished work (after s.Synchronize, say).
func (m *Mem) Detach(s *Stream) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return ErrReleased
	}
	if m.owner != s || s == nil {
		return fmt.Errorf("umem: Detach from a stream that does not own the buffer")
	}
	if m.kind == KindManaged {
		if m.d.cmaRules {
			if err := m.d.drv.streamAttachMem(m.d.ctx, s.h, m.base, memAttachHost); err != nil {
				return fmt.Errorf("umem: attach managed buffer to the host: %w", err)
			}
			m.attach = attachHost
		} else if m.prefetch {
			if err := m.d.prefetch(m.dptr, m.n, false, s); err != nil {
				return fmt.Errorf("umem: prefetch managed buffer to the CPU: %w", err)
			}
		}
	}
	m.owner, m.returning = nil, s
	m.d.stats.detaches.Add(1)
	return nil
}

// reclaim makes the host the owner again, waiting for the GPU: Detach if a
// stream still owns the buffer, then wait for the stream it was detached on.
func (m *Mem) reclaim() error {
	m.mu.Lock()
	s := m.owner
	m.mu.Unlock()
	if s != nil {
		if err := m.Detach(s); err != nil {
			return err
		}
	}
	m.mu.Lock()
	r := m.returning
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	if err := r.Synchronize(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.returning == r {
		m.returning = nil
	}
	m.mu.Unlock()
	return nil
}

// Release implements Buffer: it waits for a stream that still uses the
// buffer, then frees it. It is idempotent.
func (m *Mem) Release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return nil
	}
	var errs []error
	for _, s := range []*Stream{m.owner, m.returning} {
		if s != nil && !s.closed.Load() {
			errs = append(errs, s.sync())
		}
	}
	var err error
	switch m.kind {
	case KindPinned, KindMapped:
		err = m.d.drv.memFreeHost(m.d.ctx, m.hostBase)
	default:
		err = m.d.drv.memFree(m.d.ctx, m.base)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("umem: free %s buffer of %d bytes: %w", m.kind, m.n, err))
	}
	m.released, m.owner, m.returning, m.host = true, nil, nil, nil
	m.d.stats.buffers.Add(-1)
	m.d.stats.bytes.Add(-int64(m.size))
	return errors.Join(errs...)
}

// hostPtr is the host address for copies, without ownership checks.
func (m *Mem) hostPtr() unsafe.Pointer { return m.host }

// ReadBack copies the buffer's first len(dst) bytes into host memory dst
// and waits for the copy (on the context's default stream): how a CPU
// consumer off the hot path (the preview tap, CPU preprocessing after the
// GPU path failed) reads a frame in device memory, which Host refuses. The
// caller makes sure no stream is writing the buffer.
func (m *Mem) ReadBack(dst []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released {
		return ErrReleased
	}
	if len(dst) > m.n {
		return fmt.Errorf("umem: read back of %d bytes from a %d-byte buffer", len(dst), m.n)
	}
	if len(dst) == 0 {
		return nil
	}
	if err := m.d.drv.memcpyDtoH(m.d.ctx, unsafe.Pointer(unsafe.SliceData(dst)), m.dptr, len(dst), 0); err != nil {
		return fmt.Errorf("umem: read back %s buffer: %w", m.kind, err)
	}
	if err := m.d.drv.streamSynchronize(m.d.ctx, 0); err != nil {
		return fmt.Errorf("umem: read back %s buffer: %w", m.kind, err)
	}
	return nil
}
