package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors"
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
	type lane struct {
		strategy umem.Strategy
		strict   bool
		device   string // preprocess.device
	}
	var lanes []lane
	for _, dev := range []string{"cpu", "gpu"} {
		lanes = append(lanes, lane{umem.StrategyAuto, false, dev}, lane{umem.StrategyPinned, false, dev},
			lane{umem.StrategyMapped, false, dev}, lane{umem.StrategyManaged, false, dev}, lane{umem.StrategyManaged, true, dev})
	}
	for _, c := range lanes {
		name := string(c.strategy)
		if c.strict {
			name += "-strict"
		}
		name += "-pre-" + c.device
		t.Run(name, func(t *testing.T) {
			sink := newRecordingSink()
			cfg := defaultConfig(t, func(s string) string {
				s = mustReplace(t, s, "fps = 30.0", "fps = 200.0")
				return mustReplace(t, s, `device = "auto"           #`, `device = "`+c.device+`" #`)
			})
			f := testFactories(t, sink, backend)
			var place *umem.Placement
			f.Allocator = func(config.GPU) (umem.Allocator, string, error) {
				p, err := umem.Open(umem.Options{Strategy: c.strategy, Strict: c.strict})
				if err != nil {
					return nil, "", err
				}
				place = p
				return p.Alloc, p.Reason, nil
			}
			var gpuFrames atomic.Int64
			f.GPUPreprocess = func(o preprocess.Options, _ umem.Allocator, _ *config.Config) (GPUPreprocessor, error) {
				g, err := preprocess.NewGPU(o, preprocess.GPUOptions{Placement: place, CacheDir: t.TempDir(),
					NVRTC: os.Getenv("EDGED_NVRTC_LIB")})
				if err != nil {
					return nil, err
				}
				return countingGPU{g, &gpuFrames}, nil
			}
			_, _, stop := runDaemon(t, Options{Config: cfg, Factories: f})
			results := sink.waitResults(t, 300, 60*time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := gpuFrames.Load(); (c.device == "gpu") != (n > 0) {
				t.Errorf("preprocess.device = %q: %d frames preprocessed on the GPU", c.device, n)
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

// countingGPU counts the frames the GPU path preprocessed.
type countingGPU struct {
	*preprocess.GPU
	n *atomic.Int64
}

func (c countingGPU) Run(src umem.Buffer, n int, f sensors.Format, dst umem.Buffer) (preprocess.Transform, error) {
	c.n.Add(1)
	return c.GPU.Run(src, n, f, dst)
}

// countingBatchGPU counts the frames the GPU path preprocessed in
// batches (RunBatch: one launch per batch and pixel format).
type countingBatchGPU struct {
	countingGPU
	batches *atomic.Int64
}

func (c countingBatchGPU) RunBatch(frames []preprocess.BatchFrame, dst umem.Buffer, trs []preprocess.Transform) error {
	c.n.Add(int64(len(frames)))
	c.batches.Add(1)
	return c.GPU.RunBatch(frames, dst, trs)
}

// TestBatchedPipelineOnGPU runs a batched pipeline of four cameras with
// GPU preprocessing (every frame of a batch converted into its entry of
// the batched input by one RunBatch) on frames of each memory strategy,
// and checks each camera's results against what it drew. It needs a CUDA
// device: it skips without one, and fails instead when EDGED_REQUIRE_GPU=1.
func TestBatchedPipelineOnGPU(t *testing.T) {
	backend := ortBackend(t)
	probe, err := umem.Open(umem.Options{Strategy: umem.StrategyAuto})
	if err != nil || probe.Device == nil {
		if os.Getenv("EDGED_REQUIRE_GPU") == "1" {
			t.Fatalf("GPU required: %v (%s)", err, probe.Reason)
		}
		t.Skip("no CUDA device")
	}
	probe.Close()
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	writeAtomic(t, model, batchVariant(t, 0))
	for _, strategy := range []umem.Strategy{umem.StrategyAuto, umem.StrategyPinned, umem.StrategyMapped, umem.StrategyManaged} {
		t.Run(string(strategy), func(t *testing.T) {
			sink := newRecordingSink()
			text := mustReplace(t, batchedConfig(t, 4, 60, model, ""), `device = "auto"           #`, `device = "gpu" #`)
			cfg := parseConfig(t, text)
			f := testFactories(t, sink, backend)
			var place *umem.Placement
			f.Allocator = func(config.GPU) (umem.Allocator, string, error) {
				p, err := umem.Open(umem.Options{Strategy: strategy})
				if err != nil {
					return nil, "", err
				}
				place = p
				return p.Alloc, p.Reason, nil
			}
			var frames, batches atomic.Int64
			f.GPUPreprocess = func(o preprocess.Options, _ umem.Allocator, _ *config.Config) (GPUPreprocessor, error) {
				g, err := preprocess.NewGPU(o, preprocess.GPUOptions{Placement: place, CacheDir: t.TempDir(), NVRTC: os.Getenv("EDGED_NVRTC_LIB")})
				if err != nil {
					return nil, err
				}
				return countingBatchGPU{countingGPU{g, &frames}, &batches}, nil
			}
			_, _, stop := runDaemon(t, Options{Config: cfg, Factories: f})
			waitFor(t, 60*time.Second, func() bool {
				sink.mu.Lock()
				defer sink.mu.Unlock()
				return len(sink.results) >= 400
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			sink.mu.Lock()
			per := checkBatchedResults(t, cfg, sink.results, 4)
			sink.mu.Unlock()
			if frames.Load() == 0 || batches.Load() == 0 || frames.Load() <= batches.Load() {
				t.Errorf("%d frames preprocessed on the GPU in %d batches: want batches of several frames", frames.Load(), batches.Load())
			}
			t.Logf("%s: %s; results per camera %v correct, %d frames in %d GPU batches", place.Strategy, place.Reason, per, frames.Load(), batches.Load())
			place.Close()
		})
	}
}
