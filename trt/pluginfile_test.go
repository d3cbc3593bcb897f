package trt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fifo makes a FIFO, which opening for reading would block on.
func fifo(t *testing.T, dir string) string {
	p := filepath.Join(dir, "libfifo.so")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckPluginFile(t *testing.T) {
	dir := t.TempDir()
	elf := append([]byte("\x7fELF"), make([]byte, 60)...)
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("libgood.so", elf, 0o644)
	if err := CheckPluginFile(good, 1<<20); err != nil {
		t.Fatalf("good plugin: %v", err)
	}
	link := filepath.Join(dir, "liblink.so")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckPluginFile(link, 1<<20); err != nil {
		t.Errorf("a symlink to a good plugin: %v", err)
	}
	for _, tc := range []struct {
		path string
		max  int64
		want string
	}{
		{filepath.Join(dir, "missing.so"), 1 << 20, "no such file"},
		{dir, 1 << 20, "not a regular file"},
		{write("libbig.so", elf, 0o644), 10, "more than the 10-byte limit"},
		{fifo(t, dir), 1 << 20, "not a regular file"},
		{write("libopen.so", elf, 0o666), 1 << 20, "mode 0666 lets users other than its owner change it"},
		{write("libgroup.so", elf, 0o664), 1 << 20, "chmod go-w"},
		{write("libtext.so", []byte("not a library"), 0o644), 1 << 20, "not an ELF shared object"},
		{write("libempty.so", nil, 0o644), 1 << 20, "not an ELF shared object"},
	} {
		err := CheckPluginFile(tc.path, tc.max)
		if err == nil || !errors.Is(err, ErrPluginFile) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want an ErrPluginFile naming the path and saying %q", tc.path, err, tc.want)
		}
	}
	if os.Geteuid() == 0 {
		other := write("libother.so", elf, 0o644)
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := CheckPluginFile(other, 1<<20); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("a plugin owned by another user: %v", err)
		}
	}
}
