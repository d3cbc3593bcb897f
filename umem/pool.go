package umem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/edged-dev/edged/internal/freelist"
)

// SlotState is what a pool slot is being used for; it exists for metrics and
// for the ownership checks of the CUDA strategies.
type SlotState uint32

// Slot states.
const (
	SlotFree      SlotState = iota // in the free list
	SlotCapturing                  // leased by a source, being written
	SlotReady                      // holds a complete frame waiting for a consumer
	SlotCPU                        // being read by CPU code (preprocessing, a CPU engine)
	SlotGPU                        // owned by a CUDA stream
	numSlotStates
)

var slotStateNames = [...]string{"free", "capturing", "ready", "cpu", "gpu"}

func (s SlotState) String() string {
	if int(s) < len(slotStateNames) {
		return slotStateNames[s]
	}
	return fmt.Sprintf("SlotState(%d)", uint32(s))
}

// Pool is a fixed set of equally sized frame slots allocated at start-up.
type Pool struct {
	slots    []Slot
	free     *freelist.List[*Slot]
	slotSize int
	strategy Strategy
	lost     atomic.Int32 // slots that could not be reclaimed from the GPU

	closeOnce sync.Once
}

// Slot is one frame buffer of a pool. A leased slot has a reference count;
// the last Release returns it to the pool.
type Slot struct {
	pool  *Pool
	index int
	buf   Buffer
	host  []byte // nil when the buffer is not host-accessible
	refs  atomic.Int32
	state atomic.Uint32
}

// NewPool allocates n slots of size bytes each from a.
func NewPool(a Allocator, n, size int) (*Pool, error) {
	if n <= 0 || size <= 0 {
		return nil, fmt.Errorf("umem: pool of %d slots of %d bytes: both must be positive", n, size)
	}
	p := &Pool{
		slots:    make([]Slot, n),
		free:     freelist.New[*Slot](n),
		slotSize: size,
		strategy: a.Strategy(),
	}
	for i := range p.slots {
		b, err := a.Alloc(size)
		if err != nil {
			p.releaseAll()
			return nil, fmt.Errorf("umem: pool slot %d of %d: %w", i, n, err)
		}
		s := &p.slots[i]
		s.pool, s.index, s.buf = p, i, b
		if h, err := b.Host(); err == nil {
			s.host = h
		}
		p.free.Put(s)
	}
	return p, nil
}

// Len is the number of slots.
func (p *Pool) Len() int { return len(p.slots) }

// SlotSize is the size of each slot in bytes.
func (p *Pool) SlotSize() int { return p.slotSize }

// Strategy reports the allocator strategy the slots came from.
func (p *Pool) Strategy() Strategy { return p.strategy }

// Get leases a free slot, waiting until one is released, ctx is done or the
// pool is closed. The slot starts with one reference in state SlotCapturing.
func (p *Pool) Get(ctx context.Context) (*Slot, error) {
	s, err := p.free.Get(ctx, ErrPoolClosed)
	if err != nil {
		return nil, err
	}
	return p.lease(s), nil
}

// TryGet leases a free slot if one is available now.
func (p *Pool) TryGet() (*Slot, bool) {
	s, ok := p.free.TryGet()
	if !ok {
		return nil, false
	}
	return p.lease(s), true
}

func (p *Pool) lease(s *Slot) *Slot {
	s.refs.Store(1)
	s.state.Store(uint32(SlotCapturing))
	return s
}

// PoolStats counts slots by state.
type PoolStats struct {
	Slots int
	State [numSlotStates]int
	// Lost counts slots taken out of service because the GPU could not
	// give them back (a failed stream); they are never reused.
	Lost int
}

// Stats returns the current number of slots in each state.
func (p *Pool) Stats() PoolStats {
	st := PoolStats{Slots: len(p.slots), Lost: int(p.lost.Load())}
	for i := range p.slots {
		if s := p.slots[i].state.Load(); s < uint32(numSlotStates) {
			st.State[s]++
		}
	}
	return st
}

// Close wakes every waiting Get and releases all slot memory. Slots still
// leased must not be used afterwards. Close is idempotent.
func (p *Pool) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.free.Close()
		err = p.releaseAll()
	})
	return err
}

func (p *Pool) releaseAll() error {
	var errs []error
	for i := range p.slots {
		if b := p.slots[i].buf; b != nil {
			errs = append(errs, b.Release())
		}
	}
	return errors.Join(errs...)
}

// Index is the slot's position in its pool.
func (s *Slot) Index() int { return s.index }

// Buffer is the memory behind the slot.
func (s *Slot) Buffer() Buffer { return s.buf }

// Bytes is the slot's host view, or nil when the memory is not
// host-accessible. Callers that may run while a CUDA stream owns the slot
// must use Buffer().Host() instead, which checks ownership.
func (s *Slot) Bytes() []byte { return s.host }

// Device is the slot's device address, 0 when the GPU cannot address its
// memory: a decoder on the GPU (NVDEC) writes a picture there, device to
// device.
func (s *Slot) Device() uintptr { return s.buf.Device() }

// Size is the slot's size in bytes (the pool's slot size).
func (s *Slot) Size() int { return s.pool.slotSize }

// State reports what the slot is used for.
func (s *Slot) State() SlotState { return SlotState(s.state.Load()) }

// SetState records what the slot is used for.
func (s *Slot) SetState(st SlotState) { s.state.Store(uint32(st)) }

// Retain adds a reference.
func (s *Slot) Retain() {
	if s.refs.Add(1) <= 1 {
		panic("umem: Retain on a slot that is not leased")
	}
}

// Attach hands the slot's CUDA buffer to stream s for GPU work (see
// Mem.Attach) and marks the slot SlotGPU.
func (s *Slot) Attach(st *Stream) error {
	m, ok := s.buf.(*Mem)
	if !ok {
		return fmt.Errorf("umem: slot %d holds %s memory, which a CUDA stream cannot own", s.index, s.buf.Kind())
	}
	if err := m.Attach(st); err != nil {
		return fmt.Errorf("umem: slot %d: %w", s.index, err)
	}
	s.state.Store(uint32(SlotGPU))
	return nil
}

// Detach hands the slot back to the host after the work enqueued on st
// (see Mem.Detach) and marks it SlotCPU. Host access is legal once st has
// no unfinished work.
func (s *Slot) Detach(st *Stream) error {
	m, ok := s.buf.(*Mem)
	if !ok {
		return fmt.Errorf("umem: slot %d holds %s memory, which a CUDA stream cannot own", s.index, s.buf.Kind())
	}
	if err := m.Detach(st); err != nil {
		return fmt.Errorf("umem: slot %d: %w", s.index, err)
	}
	s.state.Store(uint32(SlotCPU))
	return nil
}

// Release drops a reference; the last one returns the slot to its pool.
// A slot whose CUDA buffer a stream still owns, or is still returning, is
// first reclaimed: Release then waits for that stream, so the next writer
// never races the GPU. If the stream failed, the slot is taken out of
// service and counted in PoolStats.Lost.
func (s *Slot) Release() {
	switch n := s.refs.Add(-1); {
	case n > 0:
		return
	case n < 0:
		panic("umem: slot released more often than leased")
	}
	if m, ok := s.buf.(*Mem); ok {
		if err := m.reclaim(); err != nil {
			s.pool.lost.Add(1)
			s.state.Store(uint32(SlotGPU))
			return
		}
	}
	s.state.Store(uint32(SlotFree))
	s.pool.free.Put(s) // never blocks: capacity equals the number of slots
}
