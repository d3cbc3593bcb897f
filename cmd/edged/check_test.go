package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt/demomodel"
)

// runCheck runs edged check -config cfg with ONNX Runtime lib and returns
// what it printed (stdout and stderr) and its exit status.
func runCheck(t *testing.T, lib, cfg string) (string, int) {
	t.Helper()
	cmd := edged("check", "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatalf("edged check: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestCheckDecidesAsRun is issue 11's second finding: check said
// "runnable" (exit 0) for configurations that run refuses with 78 once the
// model is loaded. Both now ask one function whether a pipeline fits its
// engine, so for a postprocess output the model lacks, an input the
// preprocessing cannot fill, labels that do not match the classes and a
// kind the output's shape does not suit, check and run both exit 78 and
// name the same file:line:column and key.
func TestCheckDecidesAsRun(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	cases := []struct{ from, to, key, want string }{
		{`output = "centroid"`, `output = "centroidz"`, "pipeline[0].postprocess[1].output",
			`model "demo" has no output "centroidz" (its outputs: ["class", "centroid"])`},
		{`layout = "auto" `, `layout = "nhwc" `, "pipeline[0].preprocess.layout",
			`model "demo" input image:float32[1,3,64,64] cannot be filled by preprocessing`},
		{`labels = ["red", "green", "blue", "yellow", "cyan", "magenta", "orange", "grey"]`, `labels = ["red", "green"]`, "pipeline[0].postprocess[0].labels",
			`model "demo" output class:float32[1,8]: postprocess: wrong number of labels`},
		{`kind = "topk" `, `kind = "detections" `, "pipeline[0].postprocess[0].kind",
			`model "demo" output class:float32[1,8]: postprocess: unsuitable shape`},
	}
	for _, c := range cases {
		cfg, _ := testConfig(t, dir, c.from, c.to)
		text, _ := os.ReadFile(cfg)
		want := fmt.Sprintf("%s:%s: %s: %s", cfg, valueAt(string(text), c.to), c.key, c.want)
		out, code := runCheck(t, lib, cfg)
		if code != 78 || !strings.Contains(out, want) || !strings.Contains(out, "not runnable") {
			t.Errorf("check with %s: exit %d, want 78 and %q in:\n%s", c.to, code, want, out)
		}
		code, stderr := runBriefly(t, lib, "run", cfg)
		if code != 78 || !strings.Contains(stderr, want) {
			t.Errorf("run with %s: exit %d, want 78 and %q in:\n%s", c.to, code, want, stderr)
		}
	}
}

// TestCheckReportsEveryProblem is issue 11's third finding: check stopped
// at the first missing model file and said nothing of the cameras and
// UARTs it could not find. Now one run reports every problem of every kind
// (configuration, model files, engines, devices), and the exit status
// follows one rule: 78 when any problem is a configuration problem, else 1
// when any device (or memory) is missing, else 0.
func TestCheckReportsEveryProblem(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.onnx"), []byte("junk, not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, model, extra string) string {
		text := fmt.Sprintf(`[[source]]
name = "cam"
kind = "v4l2"
device = %q
width = 640
height = 480
%s
[[source]]
name = "imu"
kind = "serial"
device = %q

[[model]]
name = "m"
path = %q

[[pipeline]]
name = "p"
source = "cam"
model = "m"
sensors = ["imu"]
sinks = ["uart", "local"]

[[sink]]
name = "uart"
kind = "serial"
device = %q

[[sink]]
name = "local"
kind = "socket"
path = %q
`, filepath.Join(dir, "video9"), extra, filepath.Join(dir, "ttyIMU"), model, filepath.Join(dir, "ttyTHS9"), filepath.Join(dir, "e.sock"))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	devices := []string{
		"FAIL  source cam: " + filepath.Join(dir, "video9") + ": no such file or directory",
		"FAIL  source imu: " + filepath.Join(dir, "ttyIMU") + " does not exist; check the cable",
		"warn  sink uart: " + filepath.Join(dir, "ttyTHS9") + ": no such file or directory",
	}
	cases := []struct {
		name, model, extra string
		code               int
		want               []string
	}{
		{"missing-model.toml", "missing.onnx", "", 78, append([]string{
			"missing-model.toml:15:8: model[0].path: model file " + filepath.Join(dir, "missing.onnx") + ": no such file or directory",
			"model m: not loaded: its file is not there"}, devices...)},
		{"bad-model.toml", "bad.onnx", "", 78, append([]string{"FAIL  model m (" + filepath.Join(dir, "bad.onnx") + "): "}, devices...)},
		{"bad-key.toml", "builtin:demo", "fsp = 30.0", 78, append([]string{"bad-key.toml:7:1: source[0].fsp: unknown key"}, devices...)},
		{"devices.toml", "builtin:demo", "", 1, append([]string{"ok    model m (builtin:demo)", "ok    pipeline p:"}, devices...)},
	}
	for _, c := range cases {
		out, code := runCheck(t, lib, write(c.name, c.model, c.extra))
		if code != c.code {
			t.Errorf("%s: exit %d, want %d:\n%s", c.name, code, c.code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the report lacks %q:\n%s", c.name, w, out)
			}
		}
	}
}

// TestTypeErrorHidesNothing is issue 11's fourth finding: one value of the
// wrong type (width = "640") made every other problem of the file
// disappear, though every problem is meant to be reported at once. Now the
// other keys are still decoded and checked: check and run report the two
// type errors, the unknown key, the dangling reference and the bad value,
// each at its line, and nothing about the zero left where a value did not
// decode (no "missing width").
func TestTypeErrorHidesNothing(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	cfg, _ := testConfig(t, dir,
		"\nwidth = 640 ", "\nwidth = \"640\" ",
		`fps = 30.0`, `fsp = 30.0`,
		`model = "demo"`, `model = "nope"`,
		`resize = "stretch"`, `resize = "squash"`,
		`max_clients = 64 `, `max_clients = "many" `)
	text, _ := os.ReadFile(cfg)
	at := func(s string) string { return cfg + ":" + valueAt(string(text), s) + ": " }
	want := []string{
		at(`width = "640"`) + `source[0].width: incompatible types: TOML value has type string; destination has type integer`,
		at(`fsp`) + `source[0].fsp: unknown key; did you mean "fps"?`,
		at(`model = "nope"`) + `pipeline[0].model: no [[model]] named "nope"`,
		at(`resize = "squash"`) + `pipeline[0].preprocess.resize: "squash" is not one of "stretch", "letterbox"`,
		at(`max_clients = "many"`) + `sink[0].max_clients: incompatible types`,
	}
	for _, sub := range []string{"check", "run"} {
		code, stderr := runBriefly(t, lib, sub, cfg)
		if code != 78 {
			t.Errorf("%s: exit %d, want 78", sub, code)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q", sub, w)
			}
		}
		if n := strings.Count(stderr, ".toml:"); n != 1+len(want) { // the heading and the problems
			t.Errorf("%s: %d problems, want exactly %d", sub, n-1, len(want))
		}
		if t.Failed() {
			t.Fatalf("%s stderr:\n%s", sub, stderr)
		}
	}
}

// TestBadModelFileNamesTheBackendOnce is one of issue 11's smaller
// findings: a bad ONNX file was reported as "trt: engine file invalid:
// onnx: model "demo": ONNX Runtime 1.30.0 cannot load it". It is a model
// file, and the backend is named once. A file refused from its first bytes
// and one that ONNX Runtime cannot load, through check and run.
func TestBadModelFileNamesTheBackendOnce(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	full, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"junk", "trt: invalid model file: "},
		{"torn", "trt: invalid model file: "},
	} {
		model := filepath.Join(dir, c.name+".onnx")
		data := []byte("junk, not a model\n")
		if c.name == "torn" {
			data = full[:len(full)/2]
		}
		if err := os.WriteFile(model, data, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour) // not being written: refused at once
		if err := os.Chtimes(model, old, old); err != nil {
			t.Fatal(err)
		}
		cfg, _ := testConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
		out, _ := runCheck(t, lib, cfg)
		_, stderr := runBriefly(t, lib, "run", cfg)
		for sub, text := range map[string]string{"check": out, "run": stderr} {
			line := ""
			for _, l := range strings.Split(text, "\n") {
				if strings.Contains(l, c.name+".onnx") && strings.Contains(l, "invalid") {
					line = l
				}
			}
			if !strings.Contains(line, c.want) {
				t.Errorf("%s, %s model: no line with %q:\n%s", sub, c.name, c.want, text)
				continue
			}
			if n := strings.Count(line, "onnx:") + strings.Count(line, "ONNX Runtime"); n != 1 || strings.Contains(line, "engine file") {
				t.Errorf("%s, %s model: the backend is named %d times, or the model is called an engine file:\n%s", sub, c.name, n, line)
			}
		}
	}
}

// TestCheckLoadsModelsAsRunDoes is issue 11's seventh finding seen from
// check: it read model files and loaded engines its own way (no format
// check before the read, no staging gate, memory budget, warm-up timeout or
// shape checks), so it refused a torn .onnx for another reason than run
// did. Both now load through the reload transaction (runtime.LoadEngine
// and the daemon's start: reload.Reloader.Load, reload.Stage): the reason is the
// same, word for word.
func TestCheckLoadsModelsAsRunDoes(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	full, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"junk": []byte("junk, not a model\n"), "torn": full[:len(full)/2]} {
		model := filepath.Join(dir, name+".onnx")
		if err := os.WriteFile(model, data, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(model, old, old); err != nil {
			t.Fatal(err)
		}
		cfg, _ := testConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
		out, code := runCheck(t, lib, cfg)
		_, stderr := runBriefly(t, lib, "run", cfg)
		reason := func(text string) string {
			const from = "invalid model file: "
			for _, l := range strings.Split(text, "\n") {
				if i := strings.Index(l, `err="`); i >= 0 { // a log line: the value is quoted
					if q, err := strconv.QuotedPrefix(l[i+4:]); err == nil {
						l, _ = strconv.Unquote(q)
					}
				}
				if i := strings.Index(l, from); i >= 0 {
					return l[i+len(from):]
				}
			}
			return ""
		}
		if r := reason(out); r == "" || r != reason(stderr) || code != 78 {
			t.Errorf("%s model: check (exit %d) says %q, run says %q", name, code, r, reason(stderr))
		}
	}
}
