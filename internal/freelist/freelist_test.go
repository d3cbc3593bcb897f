package freelist

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errClosed = errors.New("closed")

func TestGetTryGetClose(t *testing.T) {
	l := New[*int](2)
	a, b := new(int), new(int)
	l.Put(a)
	l.Put(b)
	if s, ok := l.TryGet(); !ok || s != a {
		t.Fatalf("TryGet = %p, %v; want the first slot put", s, ok)
	}
	if s, err := l.Get(context.Background(), errClosed); err != nil || s != b {
		t.Fatalf("Get = %p, %v", s, err)
	}
	if s, ok := l.TryGet(); ok || s != nil {
		t.Fatalf("TryGet of an empty list = %p, %v", s, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Get(ctx, errClosed); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get past its context = %v", err)
	}
	done := make(chan error)
	go func() {
		_, err := l.Get(context.Background(), errClosed)
		done <- err
	}()
	l.Close()
	l.Close()
	if err := <-done; err != errClosed {
		t.Fatalf("Get woken by Close = %v, want the caller's sentinel", err)
	}
	l.Put(a) // a slot released after Close is still taken
	if s, err := l.Get(context.Background(), errClosed); err != nil || s != a {
		t.Fatalf("Get of a slot put back after Close = %p, %v", s, err)
	}
	if n := testing.AllocsPerRun(100, func() {
		l.Put(a)
		if _, err := l.Get(context.Background(), errClosed); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Put+Get allocates %v times", n)
	}
}
