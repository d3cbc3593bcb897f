package umemtest

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/edged-dev/edged/umem"
)

// Options configure an Allocator.
type Options struct {
	// Kind is what buffers report; the zero value is umem.KindHost.
	Kind umem.Kind
	// Strategy is what the allocator reports; "" means host.
	Strategy umem.Strategy
	// FailAfter makes every allocation after the first FailAfter fail
	// (0: never).
	FailAfter int
}

// Allocator hands out Go-memory buffers.
type Allocator struct {
	o      Options
	n      atomic.Int64
	live   atomic.Int64
	double atomic.Int64
}

// New returns an allocator.
func New(o Options) *Allocator { return &Allocator{o: o} }

// Strategy implements umem.Allocator.
func (a *Allocator) Strategy() umem.Strategy {
	if a.o.Strategy == "" {
		return umem.StrategyHost
	}
	return a.o.Strategy
}

// ErrInjected is returned by allocations past Options.FailAfter.
var ErrInjected = fmt.Errorf("umemtest: injected allocation failure: %w", umem.ErrOutOfMemory)

// Alloc implements umem.Allocator; the buffer is a *Buffer.
func (a *Allocator) Alloc(n int) (umem.Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("umemtest: alloc of %d bytes", n)
	}
	if k := a.n.Add(1); a.o.FailAfter > 0 && k > int64(a.o.FailAfter) {
		return nil, ErrInjected
	}
	a.live.Add(1)
	return &Buffer{a: a, mem: make([]byte, n), kind: a.o.Kind}, nil
}

// Live is the number of buffers allocated and not yet released.
func (a *Allocator) Live() int { return int(a.live.Load()) }

// Buffer is a umem.Buffer in Go memory.
type Buffer struct {
	a        *Allocator
	mu       sync.Mutex
	mem      []byte
	kind     umem.Kind
	owned    bool
	released bool
}

// Kind implements umem.Buffer.
func (b *Buffer) Kind() umem.Kind { return b.kind }

// Len implements umem.Buffer.
func (b *Buffer) Len() int { return len(b.mem) }

// Device implements umem.Buffer: always 0, a device never sees this memory.
func (b *Buffer) Device() uintptr { return 0 }

// Host implements umem.Buffer, honouring SetOwnedByStream.
func (b *Buffer) Host() ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.released:
		return nil, umem.ErrReleased
	case b.owned:
		return nil, umem.ErrOwnedByStream
	}
	return b.mem, nil
}

// SetOwnedByStream simulates a CUDA stream owning the buffer (Host fails
// with umem.ErrOwnedByStream) or handing it back.
func (b *Buffer) SetOwnedByStream(owned bool) {
	b.mu.Lock()
	b.owned = owned
	b.mu.Unlock()
}

// Release implements umem.Buffer; it is idempotent.
func (b *Buffer) Release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		return nil
	}
	b.released = true
	b.a.live.Add(-1)
	return nil
}
