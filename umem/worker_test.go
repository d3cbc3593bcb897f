package umem

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWorkerRunsOnOneThreadWithContext(t *testing.T) {
	d, f := openFake(t, discreteProps, false)
	w, err := d.NewWorker()
	if err != nil {
		t.Fatal(err)
	}
	tid := -1
	job := func() error {
		cur, _ := f.ctxGetCurrent()
		if cur != d.Context() {
			return errors.New("primary context not current in the worker")
		}
		if tid != -1 && unix.Gettid() != tid {
			return errors.New("worker moved to another OS thread")
		}
		tid = unix.Gettid()
		f.ctxSetCurrent(0) // foreign code changes the context; the next job must restore it
		return nil
	}
	for range 50 {
		if err := w.Do(job); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(100, func() { w.Do(job) }); a != 0 {
		t.Errorf("%v allocations per Do", a)
	}
	want := errors.New("job failed")
	if err := w.Do(func() error { return want }); err != want {
		t.Errorf("Do = %v, want the job's error", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Do(job); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v", err)
	}
}
