package socketsink

import (
	"log/slog"

	"github.com/edged-dev/edged/runtime/ratelog"
)

// LogClients returns an OnClient callback that logs each client event to
// lg (connected, rejected, disconnected, with the peer's credentials),
// every kind at most once per ratelog.Every with a count of those left
// out: peers decide how often these happen.
func LogClients(lg *slog.Logger) func(ClientEvent) {
	var rl ratelog.Limiter
	return func(ev ClientEvent) {
		args := []any{"client", ev.ID, "uid", ev.Peer.UID, "gid", ev.Peer.GID, "pid", ev.Peer.PID}
		switch ev.Kind {
		case ClientConnected:
			rl.Log(lg, slog.LevelInfo, "connected", "client connected", args...)
		case ClientRejected:
			rl.Log(lg, slog.LevelWarn, "rejected", "client rejected", append(args, "err", ev.Err)...)
		case ClientDisconnected:
			args = append(args, "sent", ev.Sent, "dropped", ev.Dropped)
			if ev.Err != nil {
				rl.Log(lg, slog.LevelWarn, "disconnected with error", "client disconnected", append(args, "err", ev.Err)...)
			} else {
				rl.Log(lg, slog.LevelInfo, "disconnected", "client disconnected", args...)
			}
		}
	}
}
