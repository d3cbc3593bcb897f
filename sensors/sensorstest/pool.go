package sensorstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/internal/freelist"
	"github.com/edged-dev/edged/sensors"
)

// ErrPoolClosed is returned by Get on a closed Pool.
var ErrPoolClosed = errors.New("sensorstest: pool closed")

// Pool is a sensors.SlotPool for tests. It counts leases and catches
// double releases. Slots come from the Go heap (NewHeapPool) or from
// page-aligned anonymous mmap memory (NewMmapPool), the latter for tests of
// code that checks alignment (V4L2 USERPTR against a fake device). Neither
// is ever handed to a real device.
type Pool struct {
	slots []*PoolSlot
	free  *freelist.List[*PoolSlot]
	once  sync.Once
	mmap  bool

	leased  atomic.Int64
	gets    atomic.Uint64
	mu      sync.Mutex
	misuses []string
}

// PoolSlot is one slot of a Pool.
type PoolSlot struct {
	pool  *Pool
	index int
	buf   []byte
	held  atomic.Bool
}

// NewHeapPool returns a pool of n slots of size bytes on the Go heap.
func NewHeapPool(n, size int) *Pool {
	p := newPool(n)
	for i := range p.slots {
		p.add(i, make([]byte, size))
	}
	return p
}

// NewMmapPool returns a pool of n page-aligned slots of size bytes.
func NewMmapPool(n, size int) (*Pool, error) {
	p := newPool(n)
	p.mmap = true
	for i := range p.slots {
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("sensorstest: mmap slot %d: %w", i, err)
		}
		p.add(i, b)
	}
	return p, nil
}

func newPool(n int) *Pool {
	return &Pool{slots: make([]*PoolSlot, n), free: freelist.New[*PoolSlot](n)}
}

func (p *Pool) add(i int, b []byte) {
	s := &PoolSlot{pool: p, index: i, buf: b}
	p.slots[i] = s
	p.free.Put(s)
}

// Get implements sensors.SlotPool.
func (p *Pool) Get(ctx context.Context) (sensors.Slot, error) {
	s, err := p.free.Get(ctx, ErrPoolClosed)
	if err != nil {
		return nil, err
	}
	return p.lease(s), nil
}

// TryGet leases a free slot if one is available now. (Sources use it,
// when present, to refill capture queues without waiting.)
func (p *Pool) TryGet() (sensors.Slot, bool) {
	s, ok := p.free.TryGet()
	if !ok {
		return nil, false
	}
	return p.lease(s), true
}

func (p *Pool) lease(s *PoolSlot) *PoolSlot {
	s.held.Store(true)
	p.leased.Add(1)
	p.gets.Add(1)
	return s
}

// Leased is the number of slots currently leased.
func (p *Pool) Leased() int { return int(p.leased.Load()) }

// Gets is the number of successful Get calls so far.
func (p *Pool) Gets() uint64 { return p.gets.Load() }

// SlotSize is the bytes of each slot (the smallest, were they to differ).
func (p *Pool) SlotSize() int {
	n := -1
	for _, sl := range p.slots {
		if n < 0 || len(sl.buf) < n {
			n = len(sl.buf)
		}
	}
	return max(n, 0)
}

// Len is the number of slots.
func (p *Pool) Len() int { return len(p.slots) }

// Slot returns slot i (for tests that inspect memory).
func (p *Pool) Slot(i int) *PoolSlot { return p.slots[i] }

// Misuses lists double releases seen so far.
func (p *Pool) Misuses() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.misuses...)
}

// Close wakes blocked Gets; mmap memory is unmapped, so no slot may be used
// afterwards. Close is idempotent.
func (p *Pool) Close() {
	p.once.Do(func() {
		p.free.Close()
		if p.mmap {
			for _, s := range p.slots {
				if s != nil {
					_ = unix.Munmap(s.buf)
				}
			}
		}
	})
}

// Bytes implements sensors.Slot.
func (s *PoolSlot) Bytes() []byte { return s.buf }

// Index is the slot's position in its pool.
func (s *PoolSlot) Index() int { return s.index }

// Addr is the address of the slot's first byte.
func (s *PoolSlot) Addr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))) }

// Release implements sensors.Slot. A second release of the same lease is
// recorded in Misuses instead of corrupting the free list.
func (s *PoolSlot) Release() {
	if !s.held.CompareAndSwap(true, false) {
		s.pool.mu.Lock()
		s.pool.misuses = append(s.pool.misuses, fmt.Sprintf("slot %d released while not leased", s.index))
		s.pool.mu.Unlock()
		return
	}
	s.pool.leased.Add(-1)
	s.pool.free.Put(s)
}
