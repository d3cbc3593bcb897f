package serialsink

import (
	"log/slog"

	"github.com/edged-dev/edged/runtime/ratelog"
)

// LogEvents returns an OnEvent callback that logs the port's events to lg
// with their status names (serial_up, serial_down, serial_stalled), each
// kind at most once per ratelog.Every: a port that opens and fails at
// once, over and over, cannot flood the journal (its state is
// edged_serial_up).
func LogEvents(lg *slog.Logger) func(Event) {
	var rl ratelog.Limiter
	return func(ev Event) {
		switch ev.Kind {
		case Opened:
			rl.Log(lg, slog.LevelInfo, "opened", "serial port open", "event", "serial_up")
		case OpenFailed:
			rl.Log(lg, slog.LevelWarn, "open failed", "serial port cannot be opened; retrying", "event", "serial_down", "retry_in", ev.Retry.String(), "err", ev.Err)
		case Lost:
			rl.Log(lg, slog.LevelWarn, "lost", "serial port lost; reopening", "event", "serial_down", "retry_in", ev.Retry.String(), "err", ev.Err)
		case Stalled:
			rl.Log(lg, slog.LevelWarn, "stalled", "serial writes stalled; reopening the port", "event", "serial_stalled", "retry_in", ev.Retry.String(), "err", ev.Err)
		}
	}
}
