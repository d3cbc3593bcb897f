package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelNames: a model name becomes a file name in the state folder, so
// names that could leave it (../../x), hide (.x), or mean different things
// on different file systems are refused when the configuration is parsed,
// with the file, line and column of the name.
func TestModelNames(t *testing.T) {
	dir := t.TempDir()
	conf := func(name string) string {
		return `[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48

[[model]]
name = ` + name + `
path = "builtin:demo"

[[pipeline]]
name = "p"
source = "cam0"
model = ` + name + `
sinks = ["s"]

[[sink]]
name = "s"
kind = "socket"
path = "` + filepath.Join(dir, "s.sock") + `"
`
	}
	for _, bad := range []string{
		`"../../x"`, `"a/b"`, `"/etc/passwd"`, `".."`, `"."`, `".hidden"`, `"a/../b"`,
		`"` + strings.Repeat("m", MaxModelNameLen+1) + `"`, `"naïve"`, `"a:b"`, `"a*"`, `"tab\u0001"`,
	} {
		f := filepath.Join(dir, "edged.toml")
		if err := os.WriteFile(f, []byte(conf(bad)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFile(f)
		if err == nil {
			t.Errorf("model name %s accepted", bad)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("model name %s: not a configuration error: %v", bad, err)
		}
		if want := f + ":8:8: model[0].name: model name "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("model name %s: error %q, want it to start with %q", bad, err, want)
		}
	}
	for _, good := range []string{`"demo"`, `"yolo_v8-n.fp16"`, `"A1"`, `"` + strings.Repeat("m", MaxModelNameLen) + `"`} {
		if _, err := Parse("edged.toml", []byte(conf(good))); err != nil {
			t.Errorf("model name %s refused: %v", good, err)
		}
	}
}

// TestMaxModelBytes: daemon.max_model_bytes defaults to 1 GiB and must be
// at least 1 MiB (a value in MiB written as bytes would refuse every model).
func TestMaxModelBytes(t *testing.T) {
	base := `[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam0"
model = "demo"
sinks = ["s"]
[[sink]]
name = "s"
kind = "socket"
`
	cfg, err := Parse("edged.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Daemon.MaxModelBytes != 1<<30 {
		t.Errorf("default max_model_bytes %d, want 1 GiB", cfg.Daemon.MaxModelBytes)
	}
	cfg, err = Parse("edged.toml", []byte("[daemon]\nmax_model_bytes = 268_435_456\n"+base))
	if err != nil || cfg.Daemon.MaxModelBytes != 256<<20 {
		t.Errorf("max_model_bytes = 256 MiB: %v, %v", cfg, err)
	}
	for _, v := range []string{"512", "-1"} {
		_, err := Parse("edged.toml", []byte("[daemon]\nmax_model_bytes = "+v+"\n"+base))
		if err == nil || !strings.HasPrefix(err.Error(), "edged.toml:2:19: daemon.max_model_bytes: must be at least 1048576") {
			t.Errorf("max_model_bytes = %s: %v", v, err)
		}
	}
}
