package rtsptest

import (
	"context"
	"errors"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/sensors"
)

// Supervise does what runtime's capture loop (runtime/pipeline.go,
// capture) does with a source: Start, retried with internal/backoff's
// Restart policy; Next until an error (ErrSkipped frames passed over);
// Close; again, until ctx ends. Each frame goes to deliver, which owns
// its slot.
func Supervise(ctx context.Context, s sensors.Source, pool sensors.SlotPool, deliver func(sensors.Frame)) {
	failures := 0
	for ctx.Err() == nil {
		if err := s.Start(ctx, pool); err != nil {
			backoff.Sleep(ctx, backoff.Restart.Delay(failures))
			failures++
			continue
		}
		failures = 0
		for {
			f, err := s.Next(ctx)
			if errors.Is(err, sensors.ErrSkipped) {
				continue
			}
			if err != nil {
				break
			}
			deliver(f)
		}
		s.Close()
	}
}
