package freelist

import (
	"context"
	"sync"
)

// List holds the free slots of a set of n.
type List[T any] struct {
	free   chan T
	closed chan struct{}
	once   sync.Once
}

// New returns an empty list for a set of n slots.
func New[T any](n int) *List[T] {
	return &List[T]{free: make(chan T, n), closed: make(chan struct{})}
}

// Put returns a slot to the list. It never blocks while no more than n
// slots are put back than were taken.
func (l *List[T]) Put(s T) { l.free <- s }

// Get takes a free slot, waiting until one is put back, ctx is done
// (ctx.Err()) or the list is closed (closedErr, the caller's sentinel). A
// free slot is taken even when the list is closed or ctx done.
func (l *List[T]) Get(ctx context.Context, closedErr error) (T, error) {
	select {
	case s := <-l.free:
		return s, nil
	default:
	}
	var zero T
	select {
	case s := <-l.free:
		return s, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-l.closed:
		return zero, closedErr
	}
}

// TryGet takes a free slot if there is one now.
func (l *List[T]) TryGet() (T, bool) {
	select {
	case s := <-l.free:
		return s, true
	default:
		var zero T
		return zero, false
	}
}

// Close wakes every waiting Get. It is idempotent.
func (l *List[T]) Close() { l.once.Do(func() { close(l.closed) }) }
