package sensorstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
)

// WakeLimit is how long CheckSource and CheckSampleSource wait for a
// waiting Next to return before they fail.
const WakeLimit = 10 * time.Second

// SourceCase is a started frame source for CheckSource, set up so that
// its next Next waits: for a slot (the pool has none free), for the frame
// clock, or for a device that sends nothing.
type SourceCase struct {
	Source sensors.Source
	// Pool is the pool the source leases from; nil: not checked.
	Pool interface{ Leased() int }
	// Release gives back what the test holds to make Next wait (frames
	// taken earlier); nil: nothing.
	Release func()
	// Pacing says the next Next waits by design (the frame clock, a
	// camera's poll): the source must be a sensors.Pacer that says so while
	// it waits. false: a Pacer must not (a wait for a slot is not one).
	Pacing bool
}

// CheckSource checks the part of the sensors.Source contract that every
// source must keep whatever its device, in the spirit of periph's
// conntest: a waiting Next returns ctx's error as soon as its context
// ends, and sensors.ErrClosed as soon as the source is closed; Close is
// idempotent; Next after Close returns sensors.ErrClosed; and once the
// test has released its frames, no slot stays leased. It closes the
// source; checks of the device's own teardown may follow.
func CheckSource(tb testing.TB, c SourceCase) {
	tb.Helper()
	next := func(ctx context.Context) error {
		f, err := c.Source.Next(ctx)
		if err == nil {
			f.Slot.Release()
		}
		return err
	}
	checkWakes(tb, next, c.Source.Close, func() { checkPacing(tb, c) })
	if p, ok := c.Source.(sensors.Pacer); ok && p.Pacing() {
		tb.Error("Pacing after Close")
	}
	if c.Release != nil {
		c.Release()
	}
	if c.Pool != nil {
		if n := c.Pool.Leased(); n != 0 {
			tb.Errorf("%d slots still leased after Close", n)
		}
	}
}

// checkPacing runs while a Next of c waits: a Pacer says whether the wait
// is by design as c expects.
func checkPacing(tb testing.TB, c SourceCase) {
	tb.Helper()
	p, ok := c.Source.(sensors.Pacer)
	if !ok {
		if c.Pacing {
			tb.Errorf("%T waits by design but is not a sensors.Pacer", c.Source)
		}
		return
	}
	deadline := time.Now().Add(WakeLimit)
	for c.Pacing && !p.Pacing() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !c.Pacing {
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.Pacing(); got != c.Pacing {
		tb.Errorf("Pacing() = %v while Next waits, want %v", got, c.Pacing)
	}
}

// CheckSampleSource is CheckSource for a started sensors.SampleSource
// whose next Next waits.
func CheckSampleSource(tb testing.TB, s sensors.SampleSource) {
	tb.Helper()
	checkWakes(tb, func(ctx context.Context) error {
		_, err := s.Next(ctx)
		return err
	}, s.Close, nil)
}

// checkWakes checks that a waiting Next wakes on cancel and on Close;
// during is called (if not nil) while a Next waits, before Close.
func checkWakes(tb testing.TB, next func(context.Context) error, closeFn func() error, during func()) {
	tb.Helper()
	wait := func(what string, errc chan error, want error) {
		tb.Helper()
		select {
		case err := <-errc:
			if !errors.Is(err, want) {
				tb.Fatalf("%s: the waiting Next returned %v, want %v", what, err, want)
			}
		case <-time.After(WakeLimit):
			tb.Fatalf("%s did not wake the waiting Next within %v", what, WakeLimit)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- next(ctx) }()
	cancel()
	wait("cancelling its context", errc, context.Canceled)

	go func() { errc <- next(context.Background()) }()
	if during != nil {
		during()
	}
	if err := closeFn(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
	wait("Close", errc, sensors.ErrClosed)
	if err := closeFn(); err != nil {
		tb.Errorf("second Close: %v", err)
	}
	if err := next(context.Background()); !errors.Is(err, sensors.ErrClosed) {
		tb.Errorf("Next after Close: %v, want sensors.ErrClosed", err)
	}
}
