package ctxmerge

import (
	"context"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors/sensorstest"
)

func TestMergeWakesOnEither(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	defer stop()
	m := New(life, nil)
	defer m.Release()

	c1, cancel1 := context.WithCancel(context.Background())
	got := m.Context(c1)
	if m.Context(c1) != got {
		t.Fatal("same caller context: merged context was rebuilt")
	}
	cancel1()
	select {
	case <-got.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("caller cancel did not end the merged context")
	}

	c2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	got2 := m.Context(c2)
	if got2 == got {
		t.Fatal("new caller context reused the old merge")
	}
	if got2.Err() != nil {
		t.Fatal("fresh merge is already done")
	}
	stop()
	select {
	case <-got2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lifetime cancel did not end the merged context")
	}
}

func TestOnDoneRuns(t *testing.T) {
	fired := make(chan struct{}, 1)
	m := New(context.Background(), func() { fired <- struct{}{} })
	c, cancel := context.WithCancel(context.Background())
	m.Context(c)
	cancel()
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("onDone did not run")
	}
	m.Release()
}

type mapCtx struct {
	context.Context
	m map[string]int // makes the type not comparable
}

func TestNonComparableContext(t *testing.T) {
	m := New(context.Background(), nil)
	defer m.Release()
	c := mapCtx{Context: context.Background(), m: map[string]int{}}
	_ = m.Context(c)
	_ = m.Context(c) // must not panic
}

func TestSameContextNoAlloc(t *testing.T) {
	m := New(context.Background(), nil)
	defer m.Release()
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Context(c)
	if n := sensorstest.Mallocs(100, func() { m.Context(c) }); n != 0 {
		t.Fatalf("Context with the same caller allocates %v times", n)
	}
}
