package runtime

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/sensorstest"
	"github.com/edged-dev/edged/umem"
)

// TestRestartsAnnounceAnEpisodeOnce: what restarts says over the life of
// a source. A stable run that ends is announced (down), and the start
// after it (up); a source that flaps (runs that end before they are
// stable) is announced down, up, down, then nothing until a run is
// stable, however long it goes on; failed starts are never announced, and
// every failure grows the wait.
func TestRestartsAnnounceAnEpisodeOnce(t *testing.T) {
	// A run is stable after reset: the flapping runs below must end sooner
	// (they end at once, but a loaded machine can stall the test between
	// a start and its end: a second is room for that), and the stable ones
	// sleep past it.
	const reset = time.Second
	r := restarts{retry: backoff.Retry{Policy: backoff.Policy{Min: time.Millisecond, Max: 8 * time.Millisecond, Reset: reset}}}
	var said []string
	up := func(b bool) {
		if b {
			said = append(said, "up")
		}
	}
	down := func() time.Duration {
		b, d := r.ended()
		if b {
			said = append(said, "down")
		}
		return d
	}
	up(r.started()) // the first start: not news
	time.Sleep(reset + 10*time.Millisecond)
	if d := down(); d != 0 {
		t.Errorf("after a stable run: wait %v, want none", d)
	}
	r.startFailed()
	r.startFailed()
	up(r.started())
	waits := []time.Duration{}
	for range 6 { // flapping: every run ends at once
		up(r.delivering())
		waits = append(waits, down())
		up(r.started())
	}
	if want := []string{"down", "up", "down", "up", "down"}; !slices.Equal(said, want) {
		t.Errorf("announced %q, want %q", said, want)
	}
	for i, d := range waits {
		if d <= 0 || (i > 0 && d < waits[i-1]/2) {
			t.Errorf("flap %d: wait %v after %v", i, d, waits[:i])
		}
	}
	up(r.delivering()) // not stable yet
	time.Sleep(reset + 10*time.Millisecond)
	up(r.delivering()) // now it is
	up(r.delivering())
	if want := []string{"down", "up", "down", "up", "down", "up"}; !slices.Equal(said, want) {
		t.Errorf("announced %q, want %q", said, want)
	}
	if r.retry.Failures() == 0 {
		t.Error("the failures were cleared before the stable run ended")
	}
	if d := down(); d != 0 || r.retry.Failures() != 0 {
		t.Errorf("after the stable run: wait %v, failures %d", d, r.retry.Failures())
	}
}

// TestFlappingSourceBacksOff: a camera that starts and fails on its first
// Next, every time (a recording whose frames do not fit, a device that
// opens and errors). Before, it was started again at once, hundreds of
// thousands of times a second, each with a source_down and a source_up.
// Now the restarts back off (100 ms doubling to 2 s) and the host is told
// down, up, down: at most 7 starts in 3 s (6 waits of at least 50, 100,
// 200, 400, 800 and 1000 ms: the jitter halves each at worst).
func TestFlappingSourceBacksOff(t *testing.T) {
	cfg, err := config.Parse("", configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	f := sensors.Format{Width: 4, Height: 4, Pixel: sensors.GREY}
	src := sensorstest.NewSource("cam0", f)
	steps := []sensorstest.Step{{Data: make([]byte, 16)}}
	for range 100 {
		steps = append(steps, sensorstest.Step{Err: errors.New("fails at once")})
	}
	src.Push(steps...)
	pool, err := umem.NewPool(umem.NewHost(), 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	host := &fakeHost{}
	p := &pipeline{host: host, stall: time.Second, conf: cfg, cfg: &cfg.Pipelines[0], scfg: &cfg.Sources[0],
		log: slog.New(slog.DiscardHandler), src: src, pool: pool, mb: newMailbox(true, 1)}
	if err := src.Start(context.Background(), poolAdapter{pool}); err != nil {
		t.Fatal(err)
	}
	p.sourceUpEvent(p.rs.started())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.capture(ctx) }()
	time.Sleep(3 * time.Second)
	cancel()
	src.Close()
	<-done
	p.mb.drain()
	// The most starts 3 s can hold: every wait drawn at its shortest (half
	// the doubled delay: the jitter). 7 with backoff.Restart; without the
	// doubling it would be 60, without any wait hundreds of thousands.
	most := backoff.Restart.MostAttempts(3 * time.Second)
	starts, _, _ := src.Counts()
	if starts < 3 || starts > most {
		t.Errorf("%d starts in 3 s, want 3 to %d (100 ms doubling, jittered)", starts, most)
	}
	if got, want := host.seen(), []string{"source_down demo cam0", "source_up demo cam0", "source_down demo cam0"}; !slices.Equal(got, want) {
		t.Errorf("the host was told %q, want %q", got, want)
	}
}
