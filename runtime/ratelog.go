package runtime

import (
	"log/slog"

	"github.com/edged-dev/edged/runtime/ratelog"
)

// rateLog logs the first occurrence of a repeated error as a warning, then
// a count at most every 10 seconds (ratelog.Every), so a failing device
// cannot flood the journal.
type rateLog struct{ ratelog.Limiter }

func (r *rateLog) log(l *slog.Logger, msg string, args ...any) {
	r.Log(l, slog.LevelWarn, "", msg, args...)
}
