package umem

import (
	"slices"
	"strings"
	"testing"
)

// Every strategy moves a CPU-written frame to a kernel intact (the fake
// kernel reads through the addresses the uploader hands out).
func TestUploaderStrategiesFake(t *testing.T) {
	for _, c := range []struct {
		name  string
		props fakeProps
		st    Strategy
		calls []string // call prefixes expected per frame
	}{
		{"orin-auto", orinProps, StrategyAuto, []string{"attach flags=4", "attach flags=2"}},
		{"thor-auto", thorProps, StrategyAuto, []string{"prefetch dst=0", "prefetch dst=-1"}},
		{"discrete-auto", discreteProps, StrategyAuto, []string{"memcpy HtoD"}},
		{"discrete-mapped", discreteProps, StrategyMapped, nil},
		{"discrete-device", discreteProps, StrategyDevice, []string{"memcpy HtoD"}},
		{"discrete-managed", discreteProps, StrategyManaged, []string{"prefetch dst=0", "prefetch dst=-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, c.props)
			f.kernels["sum_u32"] = fakeSumKernel
			p, err := openWith(f, c.st, Options{Strategy: c.st})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			const n = 614400
			pool, err := NewPool(p.Alloc, 3, n)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s := mustStream(t, p.Device)
			up, err := p.NewUploader(s, n)
			if err != nil {
				t.Fatal(err)
			}
			defer up.Close()
			mod, _ := p.Device.LoadModule([]byte("fake"))
			sr, err := newSumRunner(p.Device, mod, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer sr.close()
			src := [2][]byte{make([]byte, n), make([]byte, n)}
			fillRandom(src[0], 1)
			fillRandom(src[1], 2)
			for i := range 6 {
				f.mu.Lock()
				f.calls = nil
				f.mu.Unlock()
				if err := frameCycle(pool, up, sr, s, src[i%2], checksumU32(src[i%2])); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				var got []string
				for _, call := range f.callsMatching("") {
					for _, w := range c.calls {
						if strings.HasPrefix(call, w) {
							got = append(got, w)
						}
					}
				}
				if !slices.Equal(got, c.calls) {
					t.Fatalf("frame %d: driver calls %q, want %q in %q", i, got, c.calls, f.callsMatching(""))
				}
			}
			if st := pool.Stats(); st.State[SlotFree] != 3 || st.Lost != 0 {
				t.Errorf("pool after frames: %+v", st)
			}
			// A frame's slot is the stream's until End.
			slot, _ := pool.TryGet()
			if _, err := up.Begin(slot.Buffer(), n); err != nil {
				t.Fatal(err)
			}
			if _, err := up.Begin(slot.Buffer(), n); err == nil {
				t.Error("second Begin before End succeeded")
			}
			if m, ok := slot.Buffer().(*Mem); ok {
				if _, err := m.Host(); err == nil {
					t.Error("Host of an uploaded slot succeeded before End")
				}
			}
			if err := up.End(); err != nil {
				t.Fatal(err)
			}
			slot.Release()
			if _, err := up.Begin(slot.Buffer(), n+1); err == nil {
				t.Error("Begin of more bytes than the buffer succeeded")
			}
		})
	}
}

// The per-frame path allocates nothing (with the fake driver; the GPU test
// repeats this through cgo).
func TestFrameCycleAllocsFake(t *testing.T) {
	for _, props := range []fakeProps{orinProps, discreteProps, thorProps} {
		f := newFake(t, props)
		f.kernels["sum_u32"] = fakeSumKernel
		f.quiet = true
		p, err := openWith(f, StrategyAuto, Options{})
		if err != nil {
			t.Fatal(err)
		}
		const n = 4096
		pool, _ := NewPool(p.Alloc, 2, n)
		s := mustStream(t, p.Device)
		up, _ := p.NewUploader(s, n)
		mod, _ := p.Device.LoadModule([]byte("fake"))
		sr, _ := newSumRunner(p.Device, mod, 1, 1)
		src := make([]byte, n)
		fillRandom(src, 3)
		want := checksumU32(src)
		var ferr error
		allocs := testing.AllocsPerRun(200, func() {
			if err := frameCycle(pool, up, sr, s, src, want); err != nil {
				ferr = err
			}
		})
		if ferr != nil {
			t.Fatal(ferr)
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per frame, want 0", props.name, allocs)
		}
		sr.close()
		up.Close()
		pool.Close()
		p.Close()
	}
}
