package umemtest

import (
	"context"
	"errors"
	"testing"

	"github.com/edged-dev/edged/umem"
)

func TestAllocatorBuffers(t *testing.T) {
	a := New(Options{Kind: umem.KindManaged, Strategy: umem.StrategyManaged, FailAfter: 3})
	var _ umem.Allocator = a
	if a.Strategy() != umem.StrategyManaged {
		t.Errorf("strategy %s", a.Strategy())
	}
	b, err := a.Alloc(10)
	if err != nil || b.Kind() != umem.KindManaged || b.Len() != 10 || b.Device() != 0 {
		t.Fatalf("buffer %v %v", b, err)
	}
	b.(*Buffer).SetOwnedByStream(true)
	if _, err := b.Host(); !errors.Is(err, umem.ErrOwnedByStream) {
		t.Errorf("Host while owned = %v", err)
	}
	b.(*Buffer).SetOwnedByStream(false)
	if h, err := b.Host(); err != nil || len(h) != 10 {
		t.Errorf("Host = %d bytes, %v", len(h), err)
	}
	if a.Live() != 1 {
		t.Errorf("live %d", a.Live())
	}
	b.Release()
	b.Release()
	if _, err := b.Host(); !errors.Is(err, umem.ErrReleased) || a.Live() != 0 {
		t.Errorf("after Release: %v, live %d", err, a.Live())
	}
	a.Alloc(1)
	a.Alloc(1)
	if _, err := a.Alloc(1); !errors.Is(err, ErrInjected) || !errors.Is(err, umem.ErrOutOfMemory) {
		t.Errorf("4th alloc = %v, want the injected failure", err)
	}
	if _, err := a.Alloc(0); err == nil {
		t.Error("zero-size alloc succeeded")
	}
}

// A umem.Pool built on it leases and releases its slots.
func TestWithPool(t *testing.T) {
	a := New(Options{})
	p, err := umem.NewPool(a, 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Get(context.Background())
	if err != nil || len(s.Bytes()) != 64 {
		t.Fatal(err)
	}
	s.Release()
	if err := p.Close(); err != nil || a.Live() != 0 {
		t.Errorf("Close: %v, live %d", err, a.Live())
	}
	_, err = umem.NewPool(New(Options{FailAfter: 1}), 2, 64)
	if !errors.Is(err, ErrInjected) {
		t.Errorf("pool over a failing allocator: %v", err)
	}
}
