package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// grownSource is a source whose frames now need slots of need bytes.
type grownSource struct {
	sensors.Source
	need int
}

func (s grownSource) SlotSize() int { return s.need }

// TestRegrowChecksMemory: a camera whose stream grows (a new SPS) gets a
// bigger frame pool only when the pool fits in memory beside what runs,
// keeping what start-up keeps for the rest of the system; otherwise the
// old pool stays (the source is started on it again and refuses the
// frames with their size).
func TestRegrowChecksMemory(t *testing.T) {
	defer func(f func() (umem.Meminfo, error)) { regrowMeminfo = f }(regrowMeminfo)
	geometry := fmt.Errorf("frame 4096x4096 larger than the slot: %w", sensors.ErrGeometry)
	for _, tc := range []struct {
		name       string
		avail, tot uint64
		need       int
		regrown    bool
	}{
		{"fits", 16 << 30, 24 << 30, 3 << 20, true},
		{"beyond MemAvailable less the reserve", 2 << 30, 8 << 30, 200 << 20, false}, // 3 × 200 MiB > 2 GiB - 2 GiB
		{"beyond MemAvailable", 256 << 20, 512 << 20, 384 << 20, false},
		{"meminfo unreadable: unchecked, as at start", 0, 0, 3 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regrowMeminfo = func() (umem.Meminfo, error) {
				if tc.tot == 0 {
					return umem.Meminfo{}, fmt.Errorf("no meminfo")
				}
				return umem.Meminfo{MemAvailable: tc.avail, MemTotal: tc.tot}, nil
			}
			host := umem.NewHost()
			old, err := umem.NewPool(host, 3, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			p := &pipeline{log: slog.New(slog.DiscardHandler), scfg: &config.Source{Name: "cam0"}, alloc: host, pool: old,
				src: grownSource{need: tc.need}}
			got := p.regrow(context.Background(), geometry)
			defer p.framePool().Close()
			if got != tc.regrown {
				t.Fatalf("regrow = %v, want %v", got, tc.regrown)
			}
			want := 1 << 20
			if tc.regrown {
				want = tc.need
			}
			if s := p.framePool().SlotSize(); s != want {
				t.Errorf("slot size %d after regrow, want %d", s, want)
			}
		})
	}
}
