package main

import (
	"net"
	"path/filepath"
	"testing"
)

// TestClientSocket: tail and reload find the daemon without -socket, both
// when it runs by hand (the run default) and under systemd (the unit's
// socket), and -socket always wins.
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
	if got := clientSocket(""); got != user {
		t.Errorf("nothing listening: %s, want the run default %s", got, user)
	}
	listen(systemSocket)
	if got := clientSocket(""); got != systemSocket {
		t.Errorf("only the unit's socket: %s, want %s", got, systemSocket)
	}
	listen(user)
	if got := clientSocket(""); got != user {
		t.Errorf("both: %s, want the run default %s", got, user)
	}
	if got := clientSocket("/x/y.sock"); got != "/x/y.sock" {
		t.Errorf("-socket: %s", got)
	}
}
