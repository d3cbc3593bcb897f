package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientSocket: tail and reload find the daemon without -socket, both
// when it runs by hand (the run default) and under systemd (the unit's
// socket), -socket always wins, and with neither there the error names
// both.
func TestClientSocket(t *testing.T) {
	xdg, sys := t.TempDir(), t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	old := systemSocket
	systemSocket = filepath.Join(sys, "edged.sock")
	defer func() { systemSocket = old }()
	listen := func(path string) {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	user := filepath.Join(xdg, "edged.sock")
	if got, err := clientSocket(""); err == nil || !strings.Contains(err.Error(), user) || !strings.Contains(err.Error(), systemSocket) {
		t.Errorf("nothing listening: %q, %v; want an error naming %s and %s", got, err, user, systemSocket)
	}
	listen(systemSocket)
	if got, _ := clientSocket(""); got != systemSocket {
		t.Errorf("only the unit's socket: %s, want %s", got, systemSocket)
	}
	listen(user)
	if got, _ := clientSocket(""); got != user {
		t.Errorf("both: %s, want the run default %s", got, user)
	}
	if got, _ := clientSocket("/x/y.sock"); got != "/x/y.sock" {
		t.Errorf("-socket: %s", got)
	}
}
