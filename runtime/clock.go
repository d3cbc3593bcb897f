package runtime

import "github.com/edged-dev/edged/sensors"

// monoNow is CLOCK_MONOTONIC in nanoseconds, the clock of frames, samples,
// latencies and progress stamps.
func monoNow() int64 { return sensors.Now() }
