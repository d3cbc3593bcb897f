package lifetime

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitEnds(t *testing.T) {
	var l Lifetime
	l.Begin()
	if err := l.Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("timer: %v", err)
	}
	if err := l.Wait(context.Background(), 0); err != nil {
		t.Fatalf("no wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := l.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("caller's context: %v", err)
	}
	time.AfterFunc(10*time.Millisecond, l.Stop)
	if err := l.Wait(context.Background(), time.Hour); !errors.Is(err, ErrStopped) {
		t.Fatalf("Stop: %v", err)
	}
	if !l.Stopped() {
		t.Error("not Stopped after Stop")
	}
	if l.Context(context.Background()).Err() == nil {
		t.Error("merged context alive after Stop")
	}
	l.Stop()
	l.End()

	// Again, from the start.
	l.Begin()
	if l.Stopped() || l.Context(context.Background()).Err() != nil {
		t.Fatal("a new run starts stopped")
	}
	l.Stop()
	l.End()
}

func TestStopBeforeBegin(t *testing.T) {
	var l Lifetime
	l.Stop()
	if l.Stopped() {
		t.Error("a Lifetime that never began reports Stopped")
	}
}

func TestWaitAllocatesNothing(t *testing.T) {
	var l Lifetime
	l.Begin()
	defer l.End()
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { l.Wait(ctx, time.Microsecond); l.Context(ctx) }); n != 0 {
		t.Errorf("%v allocations per Wait", n)
	}
}
