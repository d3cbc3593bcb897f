package config

import (
	"strings"
	"testing"
)

// TestProblemColumns is issue 19's finding that file:line:col always said
// column 1. A problem with a value points at the value; one with a key
// (unknown) at the key; one with an element of a one-line array at the
// element; a table or a key left out at the table's header; columns count
// characters, and indented and inline keys have their own.
func TestProblemColumns(t *testing.T) {
	text := `[daemon]
stop_timeout = "soon"
  log_level = "loud"

[[source]]
name = "cam0"
kind = "synthetic"
widht = 64
height = 48
fps = "fast"

[[model]]
name = "demo"
path = "builtin:demo"

[[pipeline]]
name = "p"   # café
source = "cam0"
model = "demo"
sinks = ["s", "t",  "u"]
preprocess = { resize = "squash", color = "rgb" }

[[sink]]
name = "s"
kind = "socket"
mode = "0666"
`
	_, err := Parse("f.toml", []byte(text))
	if err == nil {
		t.Fatal("accepted")
	}
	got := err.Error()
	for _, want := range []string{
		`f.toml:2:16: daemon.stop_timeout: invalid duration "soon"`,
		`f.toml:3:15: daemon.log_level: "loud" is not one of`,
		`f.toml:5:1: source[0].width: width and height must be between 1 and 16384 (got 0x48)`,
		`f.toml:8:1: source[0].widht: unknown key; did you mean "width"?`,
		`f.toml:10:7: source[0].fps: incompatible types`,
		`f.toml:20:15: pipeline[0].sinks[1]: no [[sink]] named "t"`,
		`f.toml:20:21: pipeline[0].sinks[2]: no [[sink]] named "u"`,
		`f.toml:21:25: pipeline[0].preprocess.resize: "squash" is not one of "stretch", "letterbox"`,
		`f.toml:26:8: sink[0].mode: 0666 lets every user`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q", want)
		}
	}
	// Characters, not bytes: é is two bytes.
	ix := indexKeys([]byte("[a]\n# é\n\"é\" = 1\nk = \"é\" \nl = [\"é\", 2]\n"))
	for path, want := range map[string][2]int{"a.é": {3, 7}, "a.k": {4, 5}, "a.l[1]": {5, 11}} {
		if l, c := ix.valuePos(path); l != want[0] || c != want[1] {
			t.Errorf("%s: value at %d:%d, want %d:%d", path, l, c, want[0], want[1])
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}

// TestDidYouMean: an unknown key that is a misspelling of a key of its
// table (a swap, a letter too many or too few, another case, - for _) is
// answered with that key; one that is near no key, or equally near two,
// is not.
func TestDidYouMean(t *testing.T) {
	keys := []string{"fps", "format", "width", "height", "buffers", "max_clients", "client_queue", "path", "loop", "device"}
	for name, want := range map[string]string{
		"fsp": "fps", "widht": "width", "heigth": "height", "buffer": "buffers", "max-clients": "max_clients",
		"maxClients": "max_clients", "Width": "width", "clientqueue": "client_queue", "devce": "device",
		"pth": "path", "colour": "", "x": "", "lop": "loop", "baud": "", "formats": "format",
	} {
		if got := closest(name, keys); got != want {
			t.Errorf("closest(%q) = %q, want %q", name, got, want)
		}
	}
	if got := closest("pat", []string{"path", "past"}); got != "" {
		t.Errorf("two keys one edit away: %q, want none", got)
	}
}
