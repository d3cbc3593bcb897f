package umem

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// Stream is a CUDA stream (non-blocking with respect to the legacy default
// stream). Work on it runs in order; buffers are handed to it with
// Mem.Attach. Close waits for its work and destroys it; it is idempotent.
type Stream struct {
	d      *Device
	h      uintptr
	closed atomic.Bool
}

// NewStream creates a stream.
func (d *Device) NewStream() (*Stream, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	h, err := d.drv.streamCreate(d.ctx, streamNonBlocking)
	if err != nil {
		return nil, fmt.Errorf("umem: create stream: %w", err)
	}
	s := &Stream{d: d, h: h}
	d.addStream(s)
	return s, nil
}

// Handle is the CUstream (== cudaStream_t) for other CUDA libraries.
func (s *Stream) Handle() uintptr { return s.h }

// Device is the stream's device.
func (s *Stream) Device() *Device { return s.d }

// Synchronize waits until all work on the stream is done.
func (s *Stream) Synchronize() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.sync()
}

func (s *Stream) sync() error {
	if err := s.d.drv.streamSynchronize(s.d.ctx, s.h); err != nil {
		return fmt.Errorf("umem: synchronize stream: %w", err)
	}
	return nil
}

// Query reports whether all work on the stream is done, without waiting.
func (s *Stream) Query() (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	return s.query()
}

func (s *Stream) query() (bool, error) {
	if s.closed.Load() {
		return true, nil // Close synchronized it
	}
	err := s.d.drv.streamQuery(s.d.ctx, s.h)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, resultNotReady) {
		return false, nil
	}
	return false, fmt.Errorf("umem: query stream: %w", err)
}

// Close waits for the stream's work and destroys it. Managed buffers still
// attached to it revert to global visibility, so Detach them first.
func (s *Stream) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.d.removeStream(s)
	return errors.Join(s.sync(), s.d.drv.streamDestroy(s.d.ctx, s.h))
}

// Copy enqueues a copy of n bytes from src to dst on the stream. A CUDA
// buffer the CPU can reach (managed, pinned, mapped) must be owned by the
// stream (Attach it first); host memory from NewHost is pageable, and the
// driver has staged it by the time Copy returns.
func (s *Stream) Copy(dst, src Buffer, n int) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if n < 0 || n > dst.Len() || n > src.Len() {
		return fmt.Errorf("umem: copy of %d bytes from a %d-byte %s buffer to a %d-byte %s buffer", n, src.Len(), src.Kind(), dst.Len(), dst.Kind())
	}
	if n == 0 {
		return nil
	}
	sp, sd, err := s.endpoint(src)
	if err != nil {
		return err
	}
	dp, dd, err := s.endpoint(dst)
	if err != nil {
		return err
	}
	drv, ctx := s.d.drv, s.d.ctx
	switch {
	case dd != 0 && sp != nil: // host (pageable or pinned) to device
		err = drv.memcpyHtoD(ctx, dd, sp, n, s.h)
	case dd != 0:
		err = drv.memcpyDtoD(ctx, dd, sd, n, s.h)
	case sd != 0:
		err = drv.memcpyDtoH(ctx, dp, sd, n, s.h)
	default:
		return fmt.Errorf("umem: copy between two host buffers: use copy()")
	}
	if err != nil {
		return fmt.Errorf("umem: copy %d bytes %s -> %s: %w", n, src.Kind(), dst.Kind(), err)
	}
	return nil
}

// endpoint returns the host pointer to copy from or to (pageable and pinned
// memory: copies of pinned memory run as DMA from its host address) or
// else the device address.
func (s *Stream) endpoint(b Buffer) (unsafe.Pointer, uintptr, error) {
	switch b := b.(type) {
	case *hostBuffer:
		h, err := b.Host()
		if err != nil {
			return nil, 0, err
		}
		return unsafe.Pointer(unsafe.SliceData(h)), 0, nil
	case *Mem:
		if b.d != s.d {
			return nil, 0, fmt.Errorf("umem: copy: the buffer belongs to another device")
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.released {
			return nil, 0, ErrReleased
		}
		if b.host != nil && b.owner != s {
			return nil, 0, fmt.Errorf("umem: copy: the %s buffer is not owned by this stream; Attach it first", b.kind)
		}
		if b.kind == KindPinned || b.kind == KindMapped {
			return b.host, 0, nil
		}
		return nil, b.dptr, nil
	}
	return nil, 0, fmt.Errorf("umem: copy: %T is not memory from umem", b)
}

// Event is a CUDA event.
type Event struct {
	d      *Device
	h      uintptr
	timing bool
	closed atomic.Bool
}

// NewEvent creates an event; timing enables Elapsed.
func (d *Device) NewEvent(timing bool) (*Event, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	var flags uint32
	if !timing {
		flags = eventDisableTiming
	}
	h, err := d.drv.eventCreate(d.ctx, flags)
	if err != nil {
		return nil, fmt.Errorf("umem: create event: %w", err)
	}
	return &Event{d: d, h: h, timing: timing}, nil
}

// Handle is the CUevent (== cudaEvent_t).
func (e *Event) Handle() uintptr { return e.h }

// Record captures the work enqueued on s so far.
func (e *Event) Record(s *Stream) error {
	if e.closed.Load() {
		return ErrClosed
	}
	if err := e.d.drv.eventRecord(e.d.ctx, e.h, s.h); err != nil {
		return fmt.Errorf("umem: record event: %w", err)
	}
	return nil
}

// Synchronize waits until the recorded work is done.
func (e *Event) Synchronize() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if err := e.d.drv.eventSynchronize(e.d.ctx, e.h); err != nil {
		return fmt.Errorf("umem: synchronize event: %w", err)
	}
	return nil
}

// Query reports whether the recorded work is done.
func (e *Event) Query() (bool, error) {
	if e.closed.Load() {
		return false, ErrClosed
	}
	err := e.d.drv.eventQuery(e.d.ctx, e.h)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, resultNotReady) {
		return false, nil
	}
	return false, fmt.Errorf("umem: query event: %w", err)
}

// Elapsed is the GPU time between start and e (both recorded, timing).
func (e *Event) Elapsed(start *Event) (time.Duration, error) {
	if !e.timing || !start.timing {
		return 0, fmt.Errorf("umem: Elapsed needs events created with timing")
	}
	ms, err := e.d.drv.eventElapsed(e.d.ctx, start.h, e.h)
	if err != nil {
		return 0, fmt.Errorf("umem: event elapsed time: %w", err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event; it is idempotent.
func (e *Event) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	return e.d.drv.eventDestroy(e.d.ctx, e.h)
}
