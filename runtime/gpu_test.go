package runtime

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/umem"
)

// TestDemoPipelineOnGPU runs the default pipeline with frames and tensors in
// CUDA memory of every strategy (and with the Jetson rules enforced), and
// checks each result against the drawn frame. It needs a CUDA device: it
// skips without one, and fails instead when EDGED_REQUIRE_GPU=1.
func TestDemoPipelineOnGPU(t *testing.T) {
	backend := ortBackend(t)
	probe, err := umem.Open(umem.Options{Strategy: umem.StrategyAuto})
	if err != nil || probe.Device == nil {
		if os.Getenv("EDGED_REQUIRE_GPU") == "1" {
			t.Fatalf("GPU required: %v (%s)", err, probe.Reason)
		}
		t.Skip("no CUDA device")
	}
	t.Logf("device: %s", strings.ReplaceAll(probe.Probe.String(), "\n", "; "))
	for _, c := range []struct {
		strategy umem.Strategy
		strict   bool
	}{{umem.StrategyAuto, false}, {umem.StrategyPinned, false}, {umem.StrategyMapped, false}, {umem.StrategyManaged, false}, {umem.StrategyManaged, true}} {
		name := string(c.strategy)
		if c.strict {
			name += "-strict"
		}
		t.Run(name, func(t *testing.T) {
			sink := newRecordingSink()
			cfg := defaultConfig(t, func(s string) string { return mustReplace(t, s, "fps = 30.0", "fps = 200.0") })
			f := testFactories(t, sink, backend)
			var place *umem.Placement
			f.Allocator = func(GPUConfig) (umem.Allocator, string, error) {
				p, err := umem.Open(umem.Options{Strategy: c.strategy, Strict: c.strict})
				if err != nil {
					return nil, "", err
				}
				place = p
				return p.Alloc, p.Reason, nil
			}
			_, _, stop := runDaemon(t, Options{Config: cfg, Factories: f})
			results := sink.waitResults(t, 300, 60*time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			opts := syntheticOptions(cfg.Source("cam0"))
			for _, r := range results[:300] {
				truth := synthetic.TruthAt(opts, r.FrameSeq)
				if got := r.Outputs[0].Classes[0].Index; got != truth.Background {
					t.Fatalf("frame %d: class %d, drew %d", r.FrameSeq, got, truth.Background)
				}
			}
			t.Logf("%s: %s; 300 results correct", place.Strategy, place.Reason)
			place.Close()
		})
	}
}
