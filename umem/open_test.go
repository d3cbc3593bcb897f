package umem

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestAutoPolicy(t *testing.T) {
	cases := []struct {
		name     string
		props    fakeProps
		o        Options
		strategy Strategy
		kind     Kind
		prefetch bool
		reason   []string
	}{
		{"orin", orinProps, Options{}, StrategyManaged, KindManaged, false, []string{"auto", "Fake Orin", "concurrentManagedAccess=0", "attach-HOST", "no prefetch"}},
		{"thor", thorProps, Options{}, StrategyManaged, KindManaged, true, []string{"auto", "concurrentManagedAccess=1", "attach-GLOBAL", "prefetched"}},
		{"thor-noprefetch", thorProps, Options{NoPrefetch: true}, StrategyManaged, KindManaged, false, []string{"migrate on touch"}},
		{"thor-strict", thorProps, Options{Strict: true}, StrategyManaged, KindManaged, false, []string{"attach-HOST", "no prefetch"}},
		{"discrete", discreteProps, Options{}, StrategyPinned, KindPinned, false, []string{"auto", "discrete", "pinned host slots", "staging"}},
		{"discrete-strict", discreteProps, Options{Strict: true}, StrategyPinned, KindPinned, false, []string{"strict mode"}},
		{"discrete-managed", discreteProps, Options{Strategy: StrategyManaged}, StrategyManaged, KindManaged, true, []string{"managed", "prefetched"}},
		{"discrete-managed-fault", discreteProps, Options{Strategy: StrategyManaged, NoPrefetch: true}, StrategyManaged, KindManaged, false, []string{"no prefetch"}},
		{"discrete-mapped", discreteProps, Options{Strategy: StrategyMapped}, StrategyMapped, KindMapped, false, []string{"zero-copy"}},
		{"discrete-pinned", discreteProps, Options{Strategy: StrategyPinned}, StrategyPinned, KindPinned, false, []string{"pinned"}},
		{"discrete-device", discreteProps, Options{Strategy: StrategyDevice}, StrategyDevice, KindHost, false, []string{"pageable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.o.Strategy
			if st == "" {
				st = StrategyAuto
			}
			p, err := openWith(newFake(t, c.props), st, c.o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Frames != c.kind {
				t.Errorf("frames = %s, want %s", p.Frames, c.kind)
			}
			if p.Strategy != c.strategy || p.Alloc.Strategy() != c.strategy {
				t.Errorf("strategy = %s (allocator %s), want %s", p.Strategy, p.Alloc.Strategy(), c.strategy)
			}
			for _, w := range c.reason {
				if !strings.Contains(p.Reason, w) {
					t.Errorf("reason %q lacks %q", p.Reason, w)
				}
			}
			b, err := p.Alloc.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release()
			if b.Kind() != c.kind {
				t.Errorf("buffer kind = %s, want %s", b.Kind(), c.kind)
			}
			if m, ok := b.(*Mem); ok && m.prefetch != c.prefetch {
				t.Errorf("prefetch = %v, want %v", m.prefetch, c.prefetch)
			}
		})
	}
	p := discreteProps
	p.canMap, p.managed = false, false
	for _, st := range []Strategy{StrategyMapped, StrategyManaged} {
		if _, err := openWith(newFake(t, p), st, Options{Strategy: st}); err == nil {
			t.Errorf("%s on a device without support opened", st)
		}
	}
}

// On this machine (or any without a driver) Open falls back cleanly.
func TestOpenWithoutCUDA(t *testing.T) {
	if _, err := loadDriver(); err == nil {
		t.Skip("a CUDA driver is present")
	}
	p, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Strategy != StrategyHost || p.Device != nil || p.Probe.CUDA || !strings.Contains(p.Reason, "no usable CUDA") {
		t.Errorf("auto without CUDA = %+v", p)
	}
	if _, err := p.Alloc.Alloc(10); err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if _, err := p.NewUploader(nil, 10); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("NewUploader on host placement: %v", err)
	}
	for _, st := range []Strategy{StrategyManaged, StrategyPinned, StrategyMapped, StrategyDevice} {
		_, err := Open(Options{Strategy: st})
		if !errors.Is(err, ErrNoCUDA) || !strings.Contains(err.Error(), `memory = "auto" or "host"`) {
			t.Errorf("Open(%s) without CUDA = %v, want ErrNoCUDA with advice", st, err)
		}
	}
	pr, err := ProbeDevice(DeviceOptions{})
	if !errors.Is(err, ErrNoCUDA) || pr.CUDA || !strings.HasPrefix(pr.String(), "no CUDA: ") {
		t.Errorf("ProbeDevice = %q, %v", pr, err)
	}
	if _, err := Open(Options{Strategy: "gpu"}); err == nil {
		t.Error("unknown strategy accepted")
	}
	h, err := Open(Options{Strategy: StrategyHost})
	if err != nil || h.Strategy != StrategyHost {
		t.Errorf("host: %+v %v", h, err)
	}
}

func TestProbeString(t *testing.T) {
	d, _ := openFake(t, orinProps, false)
	s := d.Probe().String()
	for _, w := range []string{"CUDA driver 13.0", "Fake Orin", "sm_87", "integrated", "concurrentManagedAccess=0", "managedMemory=1", "system memory"} {
		if !strings.Contains(s, w) {
			t.Errorf("probe %q lacks %q", s, w)
		}
	}
	if got := d.Probe().Arch(); got != "compute_87" {
		t.Errorf("Arch = %s", got)
	}
	if os.Getenv("EDGED_SHOW_PROBE") != "" {
		t.Log(s)
	}
}
