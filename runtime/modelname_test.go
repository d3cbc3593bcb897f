package runtime

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
		if !errors.Is(err, ErrConfig) {
			t.Errorf("model name %s: not a configuration error: %v", bad, err)
		}
		if want := f + ":8:1: model[0].name: model name "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("model name %s: error %q, want it to start with %q", bad, err, want)
		}
	}
	for _, good := range []string{`"demo"`, `"yolo_v8-n.fp16"`, `"A1"`, `"` + strings.Repeat("m", MaxModelNameLen) + `"`} {
		if _, err := Parse("edged.toml", []byte(conf(good))); err != nil {
			t.Errorf("model name %s refused: %v", good, err)
		}
	}
}
