package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLimiter: the first line of a kind is written, repeats within Every
// are counted, not written, and the next line after Every carries the
// count; kinds are limited apart, at their own levels.
func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	now := time.Unix(1000, 0)
	r := Limiter{now: func() time.Time { return now }}
	r.Log(l, slog.LevelWarn, "a", "first a", "n", 1)
	r.Log(l, slog.LevelWarn, "a", "second a")
	r.Log(l, slog.LevelInfo, "b", "first b")
	now = now.Add(Every - time.Millisecond)
	r.Log(l, slog.LevelWarn, "a", "third a")
	now = now.Add(time.Millisecond)
	r.Log(l, slog.LevelWarn, "a", "fourth a")
	r.Log(l, slog.LevelWarn, "a", "fifth a")
	want := []string{
		"level=WARN msg=\"first a\" n=1",
		"level=INFO msg=\"first b\"",
		"level=WARN msg=\"fourth a\" suppressed=2",
	}
	if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
