package serialsink

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogEvents: each port event is one line with its status name; a port
// that fails over and over is logged once per ratelog.Every, and an open
// after it still is.
func TestLogEvents(t *testing.T) {
	var buf bytes.Buffer
	on := LogEvents(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 5 {
		on(Event{Kind: OpenFailed, Err: errors.New("no such device")})
	}
	on(Event{Kind: Opened})
	on(Event{Kind: Stalled, Err: ErrStalled})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (one per kind):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"event=serial_down", "event=serial_up", "event=serial_stalled"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q lacks %s", i, lines[i], want)
		}
	}
}
