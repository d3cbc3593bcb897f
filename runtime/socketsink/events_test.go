package socketsink

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogClients: client events are logged with the peer's credentials,
// each kind once per ratelog.Every however often peers connect.
func TestLogClients(t *testing.T) {
	var buf bytes.Buffer
	on := LogClients(slog.New(slog.NewTextHandler(&buf, nil)))
	peer := PeerCred{UID: 1000, GID: 1000, PID: 42}
	for i := range 10 {
		on(ClientEvent{Kind: ClientConnected, ID: uint64(i), Peer: peer})
	}
	on(ClientEvent{Kind: ClientRejected, Peer: peer, Err: errors.New("too many clients")})
	on(ClientEvent{Kind: ClientDisconnected, Peer: peer, Sent: 3})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (one per kind):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`msg="client connected"`, `level=WARN msg="client rejected"`, `msg="client disconnected"`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "uid=1000 gid=1000 pid=42") {
			t.Errorf("line %d %q lacks %s or the peer", i, lines[i], want)
		}
	}
}
