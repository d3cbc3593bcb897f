package mqttsink

import (
	"errors"
	"log/slog"

	"github.com/edged-dev/edged/runtime/ratelog"
)

// LogEvents returns an OnEvent callback that logs the sink's events to lg
// with their status names (sink_up, sink_down): the queue opened (with
// what it recovered and the damage it stepped over), connections, refused
// and failed publishes, the queue degraded and restored. dir is the
// queue's folder. Repeated failures are logged at most once per
// ratelog.Every each.
func LogEvents(lg *slog.Logger, dir string) func(Event) {
	var rl ratelog.Limiter
	return func(ev Event) {
		switch ev.Kind {
		case QueueOpened:
			r := ev.Report
			what := "mqtt queue opened"
			if r.Late {
				what = "mqtt queue opened at last (it could not be until now); the records kept in memory are written to it"
			}
			args := []any{"dir", dir, "records", r.Records, "acked_seq", r.Acked, "last_seq", r.LastSeq, "seq_high_water", r.HighWater, "clean_stop", r.Clean}
			switch {
			case r.Corrupt > 0 || r.Damaged > 0:
				lg.Warn(what+"; damage stepped over (each damaged stretch cost the record it hit) and torn tails cut off (a power cut?)",
					append(args, "damaged", r.Damaged, "damaged_bytes", r.DamagedBytes, "truncated_bytes", r.Truncated, "segments_torn", r.Corrupt)...)
			default:
				lg.Info(what, args...)
			}
		case Connected:
			lg.Info("mqtt sink connected", "event", "sink_up")
		case ConnectFailed:
			what := "mqtt sink cannot connect; retrying"
			switch {
			case errors.Is(ev.Err, ErrAuth):
				what = "mqtt sink: the broker refused the credentials (username, password_file); retrying"
			case errors.Is(ev.Err, ErrTLS):
				what = "mqtt sink: TLS handshake failed (is the broker's certificate signed by ca_file?); retrying"
			}
			rl.Log(lg, slog.LevelError, what, what, "event", "sink_down", "err", ev.Err)
		case Disconnected:
			lg.Warn("mqtt sink disconnected; reconnecting", "event", "sink_down")
		case PublishFailed:
			rl.Log(lg, slog.LevelWarn, "publish failed", "mqtt publish failed or was not acknowledged in time; reconnecting and resending from the last acknowledged record", "err", ev.Err)
		case Refused:
			rl.Log(lg, slog.LevelError, "refused", "mqtt broker refused a record; dropped", "err", ev.Err)
		case QueueDegraded:
			lg.Error("mqtt queue cannot be written; keeping records in memory only until it can (tried again every 10 s; lost if edged stops meanwhile)", "dir", dir, "err", ev.Err)
		case QueueRestored:
			lg.Info("mqtt queue written again", "dir", dir)
		}
	}
}
