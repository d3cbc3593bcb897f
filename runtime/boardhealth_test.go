package runtime

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/board/boardtest"
	"github.com/edged-dev/edged/trt"
)

// slowInferBackend's engines take at least delay per inference, as a GPU
// whose clocks are slowed does.
type slowInferBackend struct {
	trt.Backend
	delay time.Duration
}

func (b slowInferBackend) Load(ctx context.Context, model []byte, o trt.LoadOptions) (trt.Engine, error) {
	e, err := b.Backend.Load(ctx, model, o)
	if err != nil {
		return nil, err
	}
	return slowInferEngine{e, b.delay}, nil
}

type slowInferEngine struct {
	trt.Engine
	delay time.Duration
}

func (e slowInferEngine) Infer(ctx context.Context) error {
	time.Sleep(e.delay)
	return e.Engine.Infer(ctx)
}

// waitUntil polls cond every 50 ms until it holds or timeout passes.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool, show func() any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; have %v", timeout, what, show())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBoardHealthOnTheRecord runs the daemon on an Orin Nano's fake tree
// (JetPack 6) with a pipeline asked for 30 fps whose inference takes
// 45 ms. The STATUS= line names the power mode; gpu-thermal heating past
// its passive trip point is a thermal_throttle record on every sink, shows
// in STATUS=, and the pipeline's part relates its rate to it ("demo: 21 of
// 30 fps, gpu-thermal throttling at 105.0 °C"); a new power mode is
// power_mode_changed; cooling 5 °C below the trip point is thermal_ok;
// MemAvailable falling below 10 % is memory_pressure.
func TestBoardHealthOnTheRecord(t *testing.T) {
	tree := boardtest.Copy(t, boardtest.OrinJP6)
	sink := newRecordingSink()
	notes := &fakeNotifier{}
	cfg := defaultConfig(t, func(s string) string {
		s = mustReplace(t, mustReplace(t, s, "\nwidth = 640 ", "\nwidth = 160 "), "height = 480\n", "height = 120\n")
		s = mustReplace(t, s, `sysfs = "/sys"`, `sysfs = "`+tree.Paths.Sys+`"`)
		s = mustReplace(t, s, `procfs = "/proc"`, `procfs = "`+tree.Paths.Proc+`"`)
		return mustReplace(t, s, `rootfs = "/"`, `rootfs = "`+tree.Paths.Root+`"`)
	})
	f := testFactories(t, sink, slowInferBackend{ortBackend(t), 45 * time.Millisecond})
	runDaemon(t, Options{Config: cfg, Factories: f, Notifier: notes})

	status := func(sub ...string) func() bool {
		return func() bool {
			st := notes.all()
			for i := len(st) - 1; i >= 0; i-- {
				if strings.HasPrefix(st[i], "STATUS=") {
					for _, s := range sub {
						if !strings.Contains(st[i], s) {
							return false
						}
					}
					return true
				}
			}
			return false
		}
	}
	lastStatus := func() any {
		st := notes.all()
		for i := len(st) - 1; i >= 0; i-- {
			if strings.HasPrefix(st[i], "STATUS=") {
				return st[i]
			}
		}
		return nil
	}
	event := func(e string) func() bool {
		return func() bool { return slices.Contains(statusEvents(sink), e) }
	}
	events := func() any { return statusEvents(sink) }

	waitUntil(t, "the power mode in STATUS=", 20*time.Second, status("demo ", "; board: power mode 15W"), lastStatus)
	if st := lastStatus().(string); strings.Contains(st, "throttling") {
		t.Errorf("throttling before the board is hot: %s", st)
	}

	tree.SetTemp(1, 105) // gpu-thermal; its passive trip point is 99 °C
	waitUntil(t, "thermal_throttle", 10*time.Second, event("thermal_throttle:gpu-thermal"), events)
	waitUntil(t, "the throttling in STATUS=", 10*time.Second, status("board: power mode 15W, gpu-thermal throttling at 105.0 °C"), lastStatus)
	waitUntil(t, "the rate related to the throttling", 20*time.Second, status("demo: ", " of 30 fps, gpu-thermal throttling at 105.0 °C, model demo gen 1 "), lastStatus)
	t.Log(lastStatus())

	tree.SetPowerMode(2)
	waitUntil(t, "power_mode_changed", 10*time.Second, event("power_mode_changed:MAXN_SUPER"), events)
	waitUntil(t, "the new mode in STATUS=", 10*time.Second, status("board: power mode MAXN_SUPER, gpu-thermal"), lastStatus)

	tree.SetTemp(1, 93.5)
	waitUntil(t, "thermal_ok", 10*time.Second, event("thermal_ok:gpu-thermal"), events)
	waitUntil(t, "no throttling in STATUS=", 20*time.Second, func() bool {
		st, _ := lastStatus().(string)
		return st != "" && !strings.Contains(st, "throttling") && strings.Contains(st, "demo ")
	}, lastStatus)

	tree.Write("proc/meminfo", "MemTotal: 7620272 kB\nMemFree: 100000 kB\nMemAvailable: 381013 kB")
	waitUntil(t, "memory_pressure", 10*time.Second, event("memory_pressure:"), events)
	waitUntil(t, "the pressure in STATUS=", 10*time.Second, status("MEMORY PRESSURE (MemAvailable 372 MiB, 5.0 % of 7.3 GiB)"), lastStatus)

	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, r := range sink.status {
		if r.Event == "thermal_throttle" && (r.Reason == "" || !strings.Contains(r.Reason, "gpu-thermal at 105.0 °C")) {
			t.Errorf("thermal_throttle record without the zone and its temperature: %+v", r)
		}
	}
}
