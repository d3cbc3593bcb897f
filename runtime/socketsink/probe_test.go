package socketsink

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProbeSocket: edged check's socket probe does what NewSocket does
// and undoes it. A missing folder is refused as NewSocket refuses it
// (ErrNoFolder: edged makes no folder outside its own) and not made, a
// path another process listens on is refused without a connection to it,
// a stale socket file is left alone, an unknown group and a path through
// a file are refused, and NewSocket then works where the probe passed.
func TestProbeSocket(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(dir, "a", "b", "edged.sock")
	if err := Probe(Options{Path: deep}); !errors.Is(err, ErrNoFolder) {
		t.Fatalf("probe in missing folders: %v, want ErrNoFolder", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the probe made the missing folders: %v", err)
	}

	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	if err := Probe(Options{Path: live}); !errors.Is(err, ErrInUse) {
		t.Errorf("a socket in use: %v, want ErrInUse", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Errorf("the probe connected %d times to the live socket", n)
	}

	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()
	before, _ := os.Lstat(stale)
	if err := Probe(Options{Path: stale}); err != nil {
		t.Errorf("a stale socket: %v", err)
	}
	if after, err := os.Lstat(stale); err != nil || !os.SameFile(before, after) {
		t.Errorf("the probe replaced or removed the stale socket: %v", err)
	}

	if err := Probe(Options{Path: filepath.Join(dir, "g.sock"), Group: "edged-no-such-group"}); err == nil || !strings.Contains(err.Error(), "edged-no-such-group") {
		t.Errorf("an unknown group: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := Probe(Options{Path: filepath.Join(file, "x.sock")}); err == nil {
		t.Error("a path through a file: accepted")
	}
	if err := Probe(Options{Path: "/" + strings.Repeat("x", 120)}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a path too long: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".edged-") {
			t.Errorf("the probe left %s", e.Name())
		}
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o500)
		if err := Probe(Options{Path: filepath.Join(ro, "x.sock")}); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("a folder this user cannot write: %v", err)
		}
	}
	if _, err := New(Options{Path: deep}); !errors.Is(err, ErrNoFolder) {
		t.Fatalf("NewSocket where the probe refused a missing folder: %v", err)
	}
	os.MkdirAll(filepath.Dir(deep), 0o755)
	if err := Probe(Options{Path: deep}); err != nil {
		t.Fatalf("probe once the folder is there: %v", err)
	}
	s, err := New(Options{Path: deep})
	if err != nil {
		t.Fatalf("NewSocket where the probe passed: %v", err)
	}
	s.Close()
}
