package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/internal/regfile"
)

// within fails the test if f takes more than a second: no path may make
// the loader wait.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// TestLoadFileRefusesWhatIsNotAFile: a configuration path that leads to a
// FIFO, a device (a symlink to /dev/zero), a folder, or a file larger
// than MaxFileBytes is refused at once and unread, with one problem that
// names the path and says why.
func TestLoadFileRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.toml")
	os.Symlink("/dev/zero", zero)
	huge := filepath.Join(dir, "huge.toml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(2 << 30) // sparse: 2 GiB that take no disk
	f.Close()
	edge := filepath.Join(dir, "edge.toml")
	os.WriteFile(edge, append([]byte("#"), make([]byte, MaxFileBytes-1)...), 0o644)
	over := filepath.Join(dir, "over.toml")
	os.WriteFile(over, make([]byte, MaxFileBytes+1), 0o644)
	for path, want := range map[string]string{
		fifo: "not a regular file (a FIFO)", zero: "not a regular file (a character device)",
		dir: "not a regular file (a directory)", huge: "file too large: 2048 MiB, more than the 1 MiB limit; it was not read",
		over: "file too large: 1048577 bytes (1.0 MiB), more than the 1 MiB limit",
	} {
		var err error
		within(t, path, func() { _, err = LoadFile(path) })
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: %v, want one configuration problem", path, err)
		}
		if got := err.Error(); !strings.HasPrefix(got, path+": cannot read configuration: ") || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to name the file and say %q", path, got, want)
		}
	}
	// At the limit it is read (a comment line of NUL bytes is then a
	// TOML problem, not a size one).
	if _, err := LoadFile(edge); err == nil || strings.Contains(err.Error(), "too large") {
		t.Errorf("a file of exactly MaxFileBytes: %v", err)
	}
}

// TestCheckFilesRefusesWhatIsNotAFile: a model path, password file or
// certificate that is a FIFO or a device, or a password file over its
// limit, is a problem at its key, found without blocking.
func TestCheckFilesRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"model.onnx", "password", "ca.pem"} {
		if err := syscall.Mkfifo(filepath.Join(dir, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/dev/urandom", filepath.Join(dir, "cert.pem"))
	os.WriteFile(filepath.Join(dir, "key.pem"), make([]byte, MaxPEMFileBytes+1), 0o600)
	text := strings.Replace(string(configs.Default), `path = "builtin:demo"`, `path = "model.onnx"`, 1) + `
[[sink]]
name = "broker"
kind = "mqtt"
url = "mqtts://broker:8883"
username = "edged"
password_file = "password"
ca_file = "ca.pem"
cert_file = "cert.pem"
key_file = "key.pem"
`
	f := filepath.Join(dir, "edged.toml")
	os.WriteFile(f, []byte(text), 0o644)
	cfg, err := LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "CheckFiles", func() { err = cfg.CheckFiles() })
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 5 {
		t.Fatalf("%v, want five problems", err)
	}
	for key, want := range map[string]string{
		"model[0].path":         "model path " + filepath.Join(dir, "model.onnx") + ": not a regular file (a FIFO)",
		"sink[1].password_file": "password file " + filepath.Join(dir, "password") + ": not a regular file (a FIFO)",
		"sink[1].ca_file":       "ca file " + filepath.Join(dir, "ca.pem") + ": not a regular file (a FIFO)",
		"sink[1].cert_file":     "cert file " + filepath.Join(dir, "cert.pem") + ": not a regular file (a character device)",
		"sink[1].key_file":      "key file " + filepath.Join(dir, "key.pem") + ": file too large",
	} {
		found := false
		for _, p := range ce.Problems {
			if p.Key == key && strings.HasPrefix(p.Msg, want) && p.Line > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem at %s saying %q:\n%v", key, want, err)
		}
	}
}

// TestNamedFilesAreReadOncePerLoad: what CheckFiles read is what the
// sinks are built from and compared by; a new load reads the files again,
// so a changed password file makes the configurations differ.
func TestNamedFilesAreReadOncePerLoad(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	os.WriteFile(pw, []byte("old\n"), 0o600)
	f := filepath.Join(dir, "edged.toml")
	os.WriteFile(f, []byte(string(configs.Default)+`
[[sink]]
name = "broker"
kind = "mqtt"
url = "mqtt://broker:1883"
username = "edged"
password_file = "password"
`), 0o644)
	load := func() *Config {
		t.Helper()
		c, err := LoadFile(f)
		if err == nil {
			err = c.CheckFiles()
		}
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := load()
	if b := load(); !Equal(a, b) {
		t.Fatal("two loads of the same files differ")
	}
	os.WriteFile(pw, []byte("new\n"), 0o600)
	if got, _ := a.ReadNamed("password", MaxPasswordFileBytes); string(got) != "old\n" {
		t.Errorf("the first load's password file reads %q now, want what it read then", got)
	}
	b := load()
	if Equal(a, b) {
		t.Error("a changed password file does not change the configuration")
	}
	if a.SinkFiles(&a.Sinks[1]) == b.SinkFiles(&b.Sinks[1]) || a.SinkFiles(&a.Sinks[0]) != b.SinkFiles(&b.Sinks[0]) {
		t.Error("SinkFiles: only the MQTT sink names a file that changed")
	}
	if got, _ := b.ReadNamed("password", MaxPasswordFileBytes); string(got) != "new\n" {
		t.Errorf("the new load reads %q", got)
	}
}

// FuzzLoadFileGuard: the configuration reader's size and type guard.
// Whatever the content, its size around MaxFileBytes and what the path
// leads to, LoadFile returns at once; a regular file within the limit is
// parsed (its problems, if any, are not about reading it), anything else
// is one problem naming the path, and nothing over the limit is parsed.
func FuzzLoadFileGuard(f *testing.F) {
	f.Add([]byte("[daemon]\nlog_level = \"info\"\n"), uint16(0), uint8(0))
	f.Add([]byte("x"), uint16(1025), uint8(0))
	f.Add([]byte("x"), uint16(1023), uint8(0))
	f.Add([]byte{}, uint16(0), uint8(1))
	f.Add([]byte{}, uint16(0), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, pad uint16, kind uint8) {
		dir := t.TempDir()
		p := filepath.Join(dir, "edged.toml")
		size := len(data)
		switch kind % 4 {
		case 0: // a regular file; pad > 0 puts its size near the limit
			b := data
			if pad > 0 {
				size = MaxFileBytes - 1024 + int(pad)%2048
				b = make([]byte, size)
				copy(b, data)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		case 2:
			os.Symlink("/dev/zero", p)
		case 3:
			os.Mkdir(p, 0o755)
		}
		var err error
		within(t, "LoadFile", func() { _, err = LoadFile(p) })
		readErr := err != nil && strings.HasPrefix(err.Error(), p+": cannot read configuration: ")
		switch {
		case kind%4 != 0:
			if !readErr || !strings.Contains(err.Error(), regfile.ErrNotRegular.Error()) {
				t.Fatalf("kind %d: %v", kind%4, err)
			}
		case size > MaxFileBytes:
			if !readErr || !strings.Contains(err.Error(), regfile.ErrTooLarge.Error()) {
				t.Fatalf("%d bytes: %v", size, err)
			}
		case readErr:
			t.Fatalf("%d bytes (within the limit) not read: %v", size, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("not a configuration error: %v", err)
		}
	})
}

// TestRTSPSourceFiles: a network camera's password file is part of what
// its pipeline is built from: another content is another identity (a
// reload restarts the pipeline with it); the same content, the same.
func TestRTSPSourceFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	text := func() []byte {
		return []byte(`[[source]]
name = "door"
kind = "rtsp"
url = "rtsp://cam.local/s1"
username = "admin"
password_file = "pw"

[[model]]
name = "demo"
path = "builtin:demo"

[[pipeline]]
name = "door"
source = "door"
model = "demo"
sinks = ["s"]

[[sink]]
name = "s"
kind = "socket"
path = "` + filepath.Join(dir, "s.sock") + `"
`)
	}
	ids := map[string]string{}
	for _, content := range []string{"one\n", "two\n", "one\n"} {
		if err := os.WriteFile(pw, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Parse(filepath.Join(dir, "edged.toml"), text())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckFiles(); err != nil {
			t.Fatal(err)
		}
		id := c.SourceFiles(c.Source("door"))
		if !strings.HasPrefix(id, "password_file=") || strings.Contains(id, "one") || strings.Contains(id, "two") {
			t.Fatalf("SourceFiles %q", id)
		}
		if prev, ok := ids[content]; ok && prev != id {
			t.Fatalf("the same content, another identity: %q, %q", prev, id)
		}
		ids[content] = id
	}
	if ids["one\n"] == ids["two\n"] {
		t.Fatal("another password, the same identity")
	}
	os.Remove(pw)
	c, err := Parse(filepath.Join(dir, "edged.toml"), text())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckFiles(); err == nil || !strings.Contains(err.Error(), "source[0].password_file: password file") {
		t.Fatalf("a missing password file: %v", err)
	}
}
