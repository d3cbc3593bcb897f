package umem

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// HostAllocator allocates page-aligned anonymous memory with mmap. It needs
// no CUDA and is what CPU-only machines and CPU backends use.
type HostAllocator struct{}

// NewHost returns a host allocator.
func NewHost() *HostAllocator { return &HostAllocator{} }

// Strategy implements Allocator.
func (*HostAllocator) Strategy() Strategy { return StrategyHost }

// Kind is the kind of memory of the buffers it allocates: host.
func (*HostAllocator) Kind() Kind { return KindHost }

// Alloc implements Allocator.
func (*HostAllocator) Alloc(n int) (Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("umem: host alloc of %d bytes: size must be positive", n)
	}
	mem, err := unix.Mmap(-1, 0, roundUp(n, PageSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("umem: host alloc of %d bytes: %w", n, err)
	}
	return &hostBuffer{mem: mem, n: n}, nil
}

type hostBuffer struct {
	mu  sync.Mutex
	mem []byte
	n   int
}

func (b *hostBuffer) Kind() Kind      { return KindHost }
func (b *hostBuffer) Len() int        { return b.n }
func (b *hostBuffer) Device() uintptr { return 0 }

func (b *hostBuffer) Host() ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil, ErrReleased
	}
	return b.mem[:b.n:b.n], nil
}

func (b *hostBuffer) Release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	err := unix.Munmap(b.mem)
	b.mem = nil
	if err != nil {
		return fmt.Errorf("umem: munmap: %w", err)
	}
	return nil
}
