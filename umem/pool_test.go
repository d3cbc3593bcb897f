package umem

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestPoolLeasesUnderRace(t *testing.T) {
	p, err := NewPool(NewHost(), 4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Len() != 4 || p.SlotSize() != 1000 || p.Strategy() != StrategyHost {
		t.Fatalf("pool %d x %d %s", p.Len(), p.SlotSize(), p.Strategy())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each worker stamps its slot and checks nobody else wrote it while
	// the lease was held, sharing it with a second reader via Retain.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				s, err := p.Get(ctx)
				if err != nil {
					errs <- err
					return
				}
				if s.State() != SlotCapturing {
					errs <- errors.New("leased slot not in state capturing")
				}
				b := s.Bytes()
				stamp := byte(w*31 + i)
				for j := range b {
					b[j] = stamp
				}
				s.SetState(SlotReady)
				s.Retain()
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer s.Release()
					for _, c := range s.Bytes() {
						if c != stamp {
							errs <- errors.New("slot written by another lease holder")
							return
						}
					}
				}()
				s.Release()
				<-done
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.State[SlotFree] != 4 || st.Slots != 4 {
		t.Errorf("stats after all releases: %+v", st)
	}
}

func TestPoolGetWaitsAndClose(t *testing.T) {
	p, err := NewPool(NewHost(), 1, 64)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := p.TryGet()
	if !ok {
		t.Fatal("TryGet on a fresh pool failed")
	}
	if _, ok := p.TryGet(); ok {
		t.Fatal("TryGet on an empty pool succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := p.Get(ctx)
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("Get after cancel = %v", err)
	}
	go func() {
		s2, err := p.Get(context.Background())
		if err == nil {
			s2.Release()
		}
		got <- err
	}()
	s.Release()
	if err := <-got; err != nil {
		t.Errorf("Get waiting for a release: %v", err)
	}
	s, _ = p.TryGet()
	go func() {
		_, err := p.Get(context.Background())
		got <- err
	}()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Get on a closed pool = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("double Release did not panic")
		}
	}()
	s.Release()
	s.Release()
}

func TestPoolHostAllocsZero(t *testing.T) {
	p, _ := NewPool(NewHost(), 2, 4096)
	defer p.Close()
	ctx := context.Background()
	if a := testing.AllocsPerRun(1000, func() {
		s, err := p.Get(ctx)
		if err != nil {
			panic(err)
		}
		s.Bytes()[0] = 1
		s.SetState(SlotCPU)
		s.Retain()
		s.Release()
		s.Release()
		_ = p.Stats()
	}); a != 0 {
		t.Errorf("%v allocations per lease, want 0", a)
	}
}

// A slot released while a stream still owns its buffer is reclaimed first;
// if the stream failed it is taken out of service.
func TestPoolReclaimsGPUSlots(t *testing.T) {
	d, f := openFake(t, orinProps, false)
	s := mustStream(t, d)
	p, err := NewPool(d.NewAllocator(StrategyManaged, MemOptions{Kind: KindManaged}), 2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	slot, _ := p.TryGet()
	if err := slot.Attach(s); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.State[SlotGPU] != 1 {
		t.Errorf("stats while attached: %+v", st)
	}
	busy(t, d, s)
	slot.Release()
	m := slot.Buffer().(*Mem)
	if m.Owner() != nil {
		t.Error("released slot still owned by the stream")
	}
	if done, _ := s.Query(); !done {
		t.Error("Release did not wait for the stream")
	}
	if _, err := m.Host(); err != nil {
		t.Errorf("free slot not host-accessible: %v", err)
	}
	if got := f.callsMatching("attach"); len(got) != 2 || got[1] != "attach flags=2" {
		t.Errorf("attach calls %q, want the slot returned to the host", got)
	}

	slot, _ = p.TryGet()
	slot.Attach(s)
	f.fail["cuStreamSynchronize"] = 700
	slot.Release()
	if st := p.Stats(); st.Lost != 1 || st.State[SlotFree] != 1 {
		t.Errorf("after a failed reclaim: %+v, want one lost slot", st)
	}
	hs, _ := NewPool(NewHost(), 1, 10)
	defer hs.Close()
	h, _ := hs.TryGet()
	if err := h.Attach(s); err == nil {
		t.Error("Attach of a host slot succeeded")
	}
	if err := h.Detach(s); err == nil {
		t.Error("Detach of a host slot succeeded")
	}
	h.Release()
}

func TestHostBuffer(t *testing.T) {
	a := NewHost()
	if _, err := a.Alloc(0); err == nil {
		t.Error("zero-size alloc succeeded")
	}
	b, err := a.Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.Host()
	if err != nil || len(h) != 5000 || cap(h) != 5000 || b.Kind() != KindHost || b.Device() != 0 {
		t.Fatalf("host buffer: len %d cap %d kind %s err %v", len(h), cap(h), b.Kind(), err)
	}
	if uintptr(ptrOf(&h[0]))%PageSize != 0 {
		t.Error("host buffer not page-aligned")
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Host(); !errors.Is(err, ErrReleased) {
		t.Errorf("Host after Release = %v", err)
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range []string{"auto", "managed", "pinned", "mapped", "device", "host"} {
		if st, err := ParseStrategy(s); err != nil || string(st) != s {
			t.Errorf("ParseStrategy(%q) = %q, %v", s, st, err)
		}
	}
	if st, err := ParseStrategy(""); err != nil || st != StrategyAuto {
		t.Errorf("empty strategy = %q, %v", st, err)
	}
	if _, err := ParseStrategy("cuda"); err == nil {
		t.Error("ParseStrategy(cuda) succeeded")
	}
}
