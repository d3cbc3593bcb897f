package umem

import (
	"runtime"
	"sync"
)

// Worker is a goroutine locked to one OS thread on which the device's
// primary context is current. umem's own calls set the context themselves
// and run from any goroutine; Worker is for CUDA libraries that use the
// calling thread's current context (TensorRT through cudart).
//
// The worker goroutine is owned by the Worker: Close stops it and waits.
// Its thread is never handed back to the Go scheduler (it exits with the
// goroutine), so no other goroutine inherits the context.
type Worker struct {
	d    *Device
	jobs chan func() error
	res  chan error
	mu   sync.Mutex // one Do at a time

	closeOnce sync.Once
	done      chan struct{}
	exited    chan struct{}
}

// NewWorker starts a worker goroutine for the device.
func (d *Device) NewWorker() (*Worker, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	w := &Worker{
		d:      d,
		jobs:   make(chan func() error),
		res:    make(chan error, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	ready := make(chan error, 1)
	go w.loop(ready)
	if err := <-ready; err != nil {
		<-w.exited
		return nil, err
	}
	return w, nil
}

func (w *Worker) loop(ready chan<- error) {
	defer close(w.exited)
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if err := w.d.drv.ctxSetCurrent(w.d.ctx); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-w.jobs:
			// Foreign code may have changed the current context.
			err := w.d.drv.ctxSetCurrent(w.d.ctx)
			if err == nil {
				err = f()
			}
			w.res <- err
		case <-w.done:
			return
		}
	}
}

// Do runs f on the worker's thread with the primary context current and
// returns its error. It allocates nothing when f is a preallocated func
// value (a method value created once, say).
func (w *Worker) Do(f func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.jobs <- f:
		return <-w.res
	case <-w.done:
		return ErrClosed
	}
}

// Close stops the worker and waits for its goroutine. It is idempotent.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() { close(w.done) })
	<-w.exited
	return nil
}
