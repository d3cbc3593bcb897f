package umem

import (
	"errors"
	"fmt"
)

// Errors returned by buffers and allocators.
var (
	// ErrReleased is returned when a released buffer is used.
	ErrReleased = errors.New("umem: buffer released")
	// ErrNotHostAccessible is returned for host access to device-only memory.
	ErrNotHostAccessible = errors.New("umem: buffer is not host-accessible")
	// ErrOwnedByStream is returned for host access while a CUDA stream owns the buffer.
	ErrOwnedByStream = errors.New("umem: buffer is owned by a CUDA stream")
	// ErrNoCUDA is returned when no usable CUDA driver is present.
	ErrNoCUDA = errors.New("umem: CUDA driver not available")
	// ErrPoolClosed is returned by a closed pool.
	ErrPoolClosed = errors.New("umem: pool closed")
)

// Kind is the kind of memory behind a buffer.
type Kind int

// Memory kinds.
const (
	KindHost    Kind = iota // page-aligned host memory (mmap), no CUDA
	KindManaged             // CUDA managed (unified) memory
	KindPinned              // page-locked host memory, device-mapped
	KindMapped              // alias of KindPinned used as zero-copy device memory
	KindDevice              // device memory, not host-accessible
)

var kindNames = [...]string{"host", "managed", "pinned", "mapped", "device"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Strategy names how frames and tensors are placed in memory; it is the
// value of the `memory` key in the [gpu] table of the configuration.
type Strategy string

// Strategies.
const (
	StrategyAuto    Strategy = "auto"
	StrategyManaged Strategy = "managed"
	StrategyPinned  Strategy = "pinned"
	StrategyMapped  Strategy = "mapped"
	StrategyDevice  Strategy = "device"
	StrategyHost    Strategy = "host"
)

// ParseStrategy validates a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case StrategyAuto, StrategyManaged, StrategyPinned, StrategyMapped, StrategyDevice, StrategyHost:
		return st, nil
	case "":
		return StrategyAuto, nil
	}
	return "", fmt.Errorf("umem: unknown memory strategy %q (want auto, managed, pinned, mapped, device or host)", s)
}

// Buffer is one allocation.
type Buffer interface {
	// Kind reports the kind of memory.
	Kind() Kind
	// Len is the usable length in bytes.
	Len() int
	// Host returns the buffer's bytes as seen by the CPU. It fails with
	// ErrNotHostAccessible for device memory, ErrOwnedByStream while a
	// stream owns the buffer and ErrReleased after Release.
	Host() ([]byte, error)
	// Device returns the device address, or 0 when the GPU cannot address it.
	Device() uintptr
	// Release frees the memory. It is idempotent.
	Release() error
}

// Allocator hands out buffers of one strategy.
type Allocator interface {
	// Alloc returns a buffer of at least n bytes whose start is aligned to
	// at least 4096 bytes.
	Alloc(n int) (Buffer, error)
	// Strategy reports the strategy this allocator implements.
	Strategy() Strategy
}

// PageSize is the alignment every allocator guarantees.
const PageSize = 4096

// roundUp rounds n up to a multiple of a (a power of two).
func roundUp(n, a int) int { return (n + a - 1) &^ (a - 1) }
