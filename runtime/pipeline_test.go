package runtime

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/sensorstest"
	"github.com/edged-dev/edged/umem"
)

// fakeHost records what a pipeline tells its host.
type fakeHost struct {
	mu       sync.Mutex
	events   []string
	refresh  int
	failures []error
}

func (h *fakeHost) publishStatus(event, pipeline, source, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, event+" "+pipeline+" "+source)
}

func (h *fakeHost) refreshStatus() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refresh++
}

func (h *fakeHost) fatal(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures = append(h.failures, err)
}

func (h *fakeHost) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// TestPipelineTellsItsHost runs a pipeline's capture loop with no daemon
// at all, only a host that records what it is told (the pipeline holds a
// pipelineHost, not the daemon): a camera that goes away and comes back
// gives source_down, then source_up, and the status is refreshed.
func TestPipelineTellsItsHost(t *testing.T) {
	cfg, err := config.Parse("", configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	f := sensors.Format{Width: 4, Height: 4, Pixel: sensors.GREY}
	src := sensorstest.NewSource("cam0", f)
	src.Push(sensorstest.Step{Data: make([]byte, 16)}, sensorstest.Step{Err: sensors.ErrDeviceGone})
	pool, err := umem.NewPool(umem.NewHost(), 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	host := &fakeHost{}
	p := &pipeline{host: host, stall: time.Second, conf: cfg, cfg: &cfg.Pipelines[0], scfg: &cfg.Sources[0],
		log: slog.New(slog.DiscardHandler), src: src, pool: pool, mb: newMailbox(true, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.capture(ctx) }()
	want := []string{"source_down demo cam0", "source_up demo cam0"}
	waitFor(t, 10*time.Second, func() bool { return len(host.seen()) >= len(want) })
	cancel()
	src.Close()
	<-done
	p.mb.drain()
	if got := host.seen(); !slices.Equal(got, want) {
		t.Errorf("the host was told %q, want %q", got, want)
	}
	if host.refresh == 0 || len(host.failures) != 0 {
		t.Errorf("refreshes %d, failures %v", host.refresh, host.failures)
	}
}
