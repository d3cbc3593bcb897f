package reload_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
)

// TestReloadSwapUnderLoad runs inferences back to back while 50 reloads
// happen: each must use a live engine, produce the output of the model
// its generation was loaded from, and see generations that never go back.
func TestReloadSwapUnderLoad(t *testing.T) {
	h := newHarness(t, func(o *reload.Options) {
		o.Debounce = 20 * time.Millisecond
		o.Settle = 10 * time.Millisecond
	})
	var values sync.Map // sha256 -> the model's output value
	values.Store(sha256.Sum256(model(0)), float32(0))
	h.start(model(0))

	stop := make(chan struct{})
	done := make(chan error, 1)
	var infers int
	go func() {
		ctx := context.Background()
		var last uint64
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			g := h.hot.Acquire()
			if g == nil {
				done <- fmt.Errorf("no engine installed")
				return
			}
			err := g.Engine.Infer(ctx)
			v := g.Engine.Outputs()[0].Float32()[0]
			want, ok := values.Load(g.SHA256)
			num := g.Number
			g.Release()
			switch {
			case err != nil:
				done <- fmt.Errorf("inference %d on generation %d: %w", infers, num, err)
				return
			case num < last:
				done <- fmt.Errorf("generation went back from %d to %d", last, num)
				return
			case !ok || v != want.(float32):
				done <- fmt.Errorf("generation %d output %v, its model computes %v", num, v, want)
				return
			}
			last = num
			infers++
		}
	}()
	const reloads = 50
	for i := 1; i <= reloads; i++ {
		data := model(float32(i))
		values.Store(sha256.Sum256(data), float32(i))
		h.replace("model.onnx", data)
		ev := h.expect(reload.OutcomeReloaded)
		if ev.Generation != uint64(i+1) {
			t.Fatalf("reload %d installed generation %d", i, ev.Generation)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	uac, cwi, overlap := h.be.Misuse()
	if uac != 0 || cwi != 0 || overlap != 0 {
		t.Fatalf("misuse: %d inferences on closed engines, %d closes during inference, %d overlapping", uac, cwi, overlap)
	}
	if live := h.be.Live(); live != 1 {
		t.Fatalf("%d engines alive after the reloads, want only the current one", live)
	}
	h.r.Close()
	h.hot.Close()
	if live := h.be.Live(); live != 0 {
		t.Fatalf("%d engines alive after closing the Hot", live)
	}
	t.Logf("%d inferences across %d reloads, at most %d engines alive at once", infers, reloads, h.be.MaxLive())
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// settleGoroutines waits (bounded) for the goroutine count to drop to at
// most n and returns the last count.
func settleGoroutines(n int) int {
	deadline := time.Now().Add(waitLong)
	for {
		g := runtime.NumGoroutine()
		if g <= n || time.Now().After(deadline) {
			return g
		}
		time.Sleep(10 * time.Millisecond) // polling a count, not synchronising with a goroutine
	}
}

func TestReloadNoLeak(t *testing.T) {
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)
	h := newHarness(t, func(o *reload.Options) {
		o.Debounce = 20 * time.Millisecond
		o.Settle = 5 * time.Millisecond
	})
	h.start(model(0))
	var g20, fd20 int
	const cycles = 200
	for i := 1; i <= cycles; i++ {
		h.replace("model.onnx", model(float32(i)))
		h.expect(reload.OutcomeReloaded)
		if i == 20 {
			g20, fd20 = runtime.NumGoroutine(), openFDs(t)
		}
	}
	if g, fd := settleGoroutines(g20), openFDs(t); g > g20 || fd > fd20 {
		t.Errorf("after %d reloads: %d goroutines and %d fds, after 20: %d and %d", cycles, g, fd, g20, fd20)
	}
	if live := h.be.Live(); live != 1 {
		t.Errorf("%d engines alive, want 1", live)
	}
	h.r.Close()
	h.hot.Close()
	if live := h.be.Live(); live != 0 {
		t.Errorf("%d engines alive after Close", live)
	}
	// Reloaders themselves: create, load, start, close.
	for i := 0; i < 50; i++ {
		hot := &trt.Hot{}
		opts := h.opts
		opts.Targets = []reload.Target{{Hot: hot}}
		r, err := reload.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.Start()
		r.Trigger()
		r.Close()
		hot.Close()
	}
	if g := settleGoroutines(g0); g > g0 {
		t.Errorf("%d goroutines after closing everything, %d before", g, g0)
	}
	if fd := openFDs(t); fd > fd0 {
		t.Errorf("%d open fds after closing everything, %d before", fd, fd0)
	}
	if live := h.be.Live(); live != 0 {
		t.Errorf("%d engines alive at the end", live)
	}
}
