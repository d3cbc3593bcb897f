package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/umem"
)

// kindAlloc is host memory that says it is another kind, and counts its
// allocations.
type kindAlloc struct {
	*umem.HostAllocator
	kind umem.Kind
	n    atomic.Int64
}

func (a *kindAlloc) Kind() umem.Kind { return a.kind }
func (a *kindAlloc) Alloc(n int) (umem.Buffer, error) {
	a.n.Add(1)
	return a.HostAllocator.Alloc(n)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFrameAllocatorPerPipeline: a pipeline's frame pool comes from
// Factories.FrameAllocator when it returns one (the wiring's device
// memory for NVDEC's pictures), the GPU preprocessing is built for that
// allocator, and the start log says where the frames live and why.
func TestFrameAllocatorPerPipeline(t *testing.T) {
	backend := ortBackend(t)
	sink := newRecordingSink()
	cfg := defaultConfig(t, func(s string) string { return mustReplace(t, s, "fps = 30.0", "fps = 200.0") })
	f := testFactories(t, sink, backend)
	frames := &kindAlloc{HostAllocator: umem.NewHost(), kind: umem.KindDevice}
	var asked []string
	var mu sync.Mutex
	f.FrameAllocator = func(pc *config.Pipeline, _ *config.Source, _ *config.Config) (umem.Allocator, string, error) {
		mu.Lock()
		asked = append(asked, pc.Name)
		mu.Unlock()
		return frames, "where the test's decoder writes them", nil
	}
	var gotFrames atomic.Value
	f.GPUPreprocess = func(o preprocess.Options, a umem.Allocator, _ *config.Config) (GPUPreprocessor, error) {
		gotFrames.Store(fmt.Sprintf("%p", a))
		return nil, fmt.Errorf("%w: the test has none", preprocess.ErrNoGPU)
	}
	logs := &lockedBuffer{}
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: f, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	sink.waitResults(t, 5, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	pc := &cfg.Pipelines[0]
	if want := int64(poolSlots(cfg.Source(pc.Source), pc)); frames.n.Load() != want {
		t.Errorf("the frame allocator made %d slots, the pool has %d", frames.n.Load(), want)
	}
	mu.Lock()
	if len(asked) != len(cfg.Pipelines) || asked[0] != pc.Name {
		t.Errorf("FrameAllocator asked for %v, want each of %d pipelines once", asked, len(cfg.Pipelines))
	}
	mu.Unlock()
	if got := gotFrames.Load(); got != fmt.Sprintf("%p", frames) {
		t.Errorf("GPUPreprocess was given allocator %v, not the pipeline's frame allocator %p", got, frames)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="frame memory"`) {
			line = l
		}
	}
	for _, want := range []string{"pipeline=" + pc.Name, "memory=device", `why="where the test's decoder writes them"`} {
		if !strings.Contains(line, want) {
			t.Errorf("frame memory log line %q lacks %q", line, want)
		}
	}
}

// TestFrameAllocatorDefaultsToTheDaemons: without a frame allocator (or
// when it returns none) the pool is the daemon's, and the log says so;
// an error fails the start with the pipeline's name.
func TestFrameAllocatorDefaultsToTheDaemons(t *testing.T) {
	cfg := defaultConfig(t, nil)
	d := &daemon{alloc: umem.NewHost(), log: slog.New(slog.DiscardHandler)}
	p := &pipeline{cfg: &cfg.Pipelines[0], conf: cfg, scfg: cfg.Source(cfg.Pipelines[0].Source), log: d.log}
	if a, err := d.frameAllocator(p); err != nil || a != d.alloc {
		t.Fatalf("no FrameAllocator: %v, %v; want the daemon's", a, err)
	}
	d.opts.Factories.FrameAllocator = func(*config.Pipeline, *config.Source, *config.Config) (umem.Allocator, string, error) {
		return nil, "cpu decoder", nil
	}
	if a, err := d.frameAllocator(p); err != nil || a != d.alloc {
		t.Fatalf("FrameAllocator returning none: %v, %v; want the daemon's", a, err)
	}
	boom := errors.New("boom")
	d.opts.Factories.FrameAllocator = func(*config.Pipeline, *config.Source, *config.Config) (umem.Allocator, string, error) {
		return nil, "", boom
	}
	if _, err := d.frameAllocator(p); !errors.Is(err, boom) || !strings.Contains(err.Error(), p.cfg.Name) {
		t.Fatalf("FrameAllocator failing: %v", err)
	}
}

// TestCheckMemoryDevicePools: a frame pool in device memory (an NVDEC-fed
// pipeline's) counts against the GPU's memory, not the system's, and a
// GPU too small for it is named at the source's buffers.
func TestCheckMemoryDevicePools(t *testing.T) {
	cfg := defaultConfig(t, nil)
	plan := PlanMemory(cfg, nil, true)
	host := plan.Host()
	plan.Needs[0].PoolOnDevice = true
	pool := plan.Needs[0].PoolBytes()
	if pool <= 0 || plan.Host() != host-pool || plan.Device() != pool {
		t.Fatalf("pool %d: host %d (was %d), device %d", pool, plan.Host(), host, plan.Device())
	}
	gpu := func(free, total uint64) MemoryBudget {
		return MemoryBudget{ProcRoot: meminfo(t, 8192, 8192), Device: func() (uint64, uint64, error) { return free, total, nil }}
	}
	r, err := CheckMemory(cfg, plan, MemoryPlan{}, gpu(1<<30, 1<<30))
	if err != nil || !strings.Contains(r.String(), "GPU engines and frame pools ("+FormatSize(pool)+")") {
		t.Fatalf("1 GiB GPU: %v; report %s", err, r)
	}
	_, err = CheckMemory(cfg, plan, MemoryPlan{}, gpu(uint64(pool), uint64(pool)))
	for _, want := range []string{"source[0].buffers: pipeline \"demo\": frame pool of", "in GPU memory", "TensorRT engines and frame pools need"} {
		if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), want) {
			t.Errorf("a GPU the size of the pool: %v; want %q", err, want)
		}
	}
}
