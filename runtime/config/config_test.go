package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/mqttsink"
)

// TestShippedConfigs loads every file in configs/: the embedded default and
// each example must decode and validate.
func TestShippedConfigs(t *testing.T) {
	cfg, err := Parse("", configs.Default)
	if err != nil {
		t.Fatalf("embedded default: %v", err)
	}
	if err := cfg.CheckFiles(); err != nil {
		t.Fatalf("embedded default names files that do not exist: %v", err)
	}
	files, err := filepath.Glob("../../configs/examples/*.toml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	files = append(files, "../../configs/edged.toml", "../../packaging/edged.toml")
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

// TestDefaultDocumentsEveryKey checks that configs/edged.toml mentions every
// key the schema has (set or commented out).
func TestDefaultDocumentsEveryKey(t *testing.T) {
	text := string(configs.Default)
	var walk func(rt reflect.Type, where string)
	walk = func(rt reflect.Type, where string) {
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			tag := f.Tag.Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration{}) {
				if !regexp.MustCompile(`\[\[?(\w+\.)?` + tag + `\]\]?`).MatchString(text) {
					t.Errorf("table [%s] (%s) not documented in configs/edged.toml", tag, where)
				}
				walk(ft, tag)
				continue
			}
			if !regexp.MustCompile(`(?m)^#?\s*` + tag + ` = `).MatchString(text) {
				t.Errorf("key %s.%s not documented in configs/edged.toml", where, tag)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// TestDocumentedDefaultsAreTheDefaults parses a minimal configuration and
// checks that the defaults filled in equal the values written in the
// embedded default file.
func TestDocumentedDefaultsAreTheDefaults(t *testing.T) {
	full, err := Parse("", configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	minimal, err := Parse("", []byte(`
[[source]]
name = "cam0"
kind = "synthetic"
width = 640
height = 480
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "demo"
source = "cam0"
model = "demo"
sinks = ["local"]
[[pipeline.postprocess]]
output = "class"
kind = "topk"
labels = ["red", "green", "blue", "yellow", "cyan", "magenta", "orange", "grey"]
[[pipeline.postprocess]]
output = "centroid"
[[sink]]
name = "local"
kind = "socket"
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(full.Daemon, minimal.Daemon) {
		t.Errorf("[daemon] defaults differ:\nfile:     %+v\ndefaults: %+v", full.Daemon, minimal.Daemon)
	}
	if !reflect.DeepEqual(full.GPU, minimal.GPU) {
		t.Errorf("[gpu] defaults differ: %+v vs %+v", full.GPU, minimal.GPU)
	}
	fs, ms := full.Sources[0], minimal.Sources[0]
	fs.Seed, fs.FPS = 0, 0 // set explicitly in the file (30 fps, seed 1), not defaults
	ms.Seed, ms.FPS = 0, 0
	if !reflect.DeepEqual(fs, ms) {
		t.Errorf("[[source]] defaults differ:\nfile:     %+v\ndefaults: %+v", fs, ms)
	}
	fm, mm := full.Models[0], minimal.Models[0]
	fm.Reload, mm.Reload = nil, nil
	if len(fm.Plugins) == 0 && len(mm.Plugins) == 0 {
		fm.Plugins, mm.Plugins = nil, nil // plugins = [] and no plugins are the same
	}
	if !reflect.DeepEqual(fm, mm) || !full.Models[0].ReloadEnabled() || !minimal.Models[0].ReloadEnabled() {
		t.Errorf("[[model]] defaults differ: %+v vs %+v", fm, mm)
	}
	fp, mp := full.Pipelines[0], minimal.Pipelines[0]
	if fp.Sensors == nil {
		fp.Sensors = []string{}
	}
	mp.Sensors = []string{}
	if !reflect.DeepEqual(fp, mp) {
		t.Errorf("[[pipeline]] defaults differ:\nfile:     %+v\ndefaults: %+v", fp, mp)
	}
	fk, mk := full.Sinks[0], minimal.Sinks[0]
	fk.AllowUIDs, fk.AllowGIDs = nil, nil
	if !reflect.DeepEqual(fk, mk) {
		t.Errorf("[[sink]] defaults differ:\nfile:     %+v\ndefaults: %+v", fk, mk)
	}
}

func TestBadConfigs(t *testing.T) {
	dir := t.TempDir()
	base := `
[[source]]
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
path = "` + filepath.Join(dir, "s.sock") + `"
`
	cases := []struct {
		name, text string
		want       []string // substrings of the message, in order of problems
	}{
		{"unknown key", strings.Replace(base, `width = 64`, `widht = 64`, 1),
			[]string{`:5:1: source[0].widht: unknown key`}},
		{"unknown table key in second pipeline", base + `
[[pipeline]]
name = "q"
source = "cam0"
model = "demo"
sinks = ["s"]
schedul = "latest"
`, []string{`:28:1: pipeline[1].schedul: unknown key; did you mean "schedule"?`}},
		{"wrong type", strings.Replace(base, `width = 64`, `width = "wide"`, 1),
			[]string{`:5:9: source[0].width: `, `incompatible types`}},
		{"wrong type in second element", base + `
[[source]]
name = "cam1"
kind = "synthetic"
fps = "fast"
`, []string{`:26:7: source[1].fps: `}},
		{"syntax", base + "\n[daemon\n", []string{`:24:8: expected '.' or ']' to end table name`}},
		{"duplicate names", base + `
[[sink]]
name = "s"
kind = "socket"
`, []string{`:24:8: sink[1].name: duplicate name "s" (also used by sink[0])`}},
		{"dangling references", strings.Replace(strings.Replace(base, `model = "demo"`+"\n"+`sinks`, `model = "nope"`+"\n"+`sinks`, 1), `sinks = ["s"]`, `sinks = ["s", "t"]`, 1),
			[]string{`:15:9: pipeline[0].model: no [[model]] named "nope"`, `:16:15: pipeline[0].sinks[1]: no [[sink]] named "t"`}},
		{"several problems at once", strings.Replace(strings.Replace(base, `kind = "socket"`, `kind = "sockt"`, 1), `width = 64`, `width = -1`, 1),
			[]string{`source[0].width: width and height`, `sink[0].kind: "sockt" is not one of`}},
		{"unknown key with validation problems", strings.Replace(strings.Replace(base, `width = 64`, `widht = 64`, 1), `model = "demo"`+"\n"+`sinks`, `model = "nope"`+"\n"+`sinks`, 1),
			[]string{`:2:1: source[0].width: width and height must be between 1 and 16384 (got 0x48)`, `:5:1: source[0].widht: unknown key; did you mean "width"?`, `:15:9: pipeline[0].model: no [[model]] named "nope"`}},
		{"rtsp decoder unknown", strings.Replace(base, "kind = \"synthetic\"\nwidth = 64\nheight = 48", "kind = \"rtsp\"\nurl = \"rtsp://cam.local/s1\"\ndecoder = \"vaapi\"", 1),
			[]string{`:6:11: source[0].decoder: "vaapi" is not one of "auto", "cpu", "nvdec", "v4l2"`}},
		{"rtsp keys", strings.Replace(base, "kind = \"synthetic\"\nwidth = 64\nheight = 48", "kind = \"rtsp\"\nurl = \"rtsp://admin:hunter2@cam.local/s1\"\ntransport = \"quic\"\nwidth = 64\npassword_file = \"pw\"", 1),
			[]string{`:5:7: source[0].url: must not hold credentials`, `:6:13: source[0].transport: "quic" is not one of`, `:7:9: source[0].width: is not a key of an rtsp source`, `:8:17: source[0].password_file: a password without a username`}},
		{"missing frame size", strings.Replace(strings.Replace(base, "width = 64\n", "", 1), "height = 48\n", "", 1),
			[]string{`:2:1: source[0].width: missing: a synthetic source needs width and height`}},
		{"bad enum in inline position", strings.Replace(base, `[[sink]]`, "[pipeline.preprocess]\nresize = \"squash\"\n\n[[sink]]", 1),
			[]string{`:19:10: pipeline[0].preprocess.resize: "squash" is not one of "stretch", "letterbox"`}},
		{"world-writable socket", strings.Replace(base, `kind = "socket"`, "kind = \"socket\"\nmode = \"0666\"", 1),
			[]string{`sink[0].mode: 0666 lets every user`}},
		{"no pipeline", "[daemon]\n", []string{`no [[pipeline]] defined`}},
		{"serial source as pipeline source", strings.Replace(base, `kind = "synthetic"`, "kind = \"serial\"\ndevice = \"/dev/null\"", 1),
			[]string{`pipeline[0].source: source "cam0" is a serial sensor`}},
		{"mqtt url scheme", strings.Replace(base, `kind = "socket"`, "kind = \"mqtt\"\nurl = \"http://broker:1883\"", 1),
			[]string{`:21:7: sink[0].url: scheme "http" is not "mqtt" or "mqtts"`}},
		{"mqtt problems", strings.Replace(base, `kind = "socket"`, "kind = \"mqtt\"\nurl = \"mqtt://broker\"\nqos = 2\ntopic = \"a/{pipe}/#\"\nstatus_topic = \"s/{pipeline}\"\nca_file = \"ca.pem\"\nkey_file = \"k.pem\"\nqueue_bytes = 100", 1),
			[]string{`:18:1: sink[0].cert_file: cert_file and key_file go together`, `:21:7: sink[0].url: ca_file, cert_file and key_file need TLS`, `:22:7: sink[0].qos: must be 0 or 1`,
				`:23:9: sink[0].topic: "a/{pipe}/#": unknown placeholder {pipe}`, `:24:16: sink[0].status_topic: "s/{pipeline}": {pipeline} is not known here`, `:27:15: sink[0].queue_bytes: must be at least 65536`}},
		{"mqtt missing url", strings.Replace(base, `kind = "socket"`, "kind = \"mqtt\"", 1),
			[]string{`:18:1: sink[0].url: missing: an mqtt sink needs url`}},
		{"device id with a slash", strings.Replace(base, `[[source]]`, "[daemon]\ndevice_id = \"a/b\"\n\n[[source]]", 1),
			[]string{`:3:13: daemon.device_id: "a/b" must not contain /`}},
		{"relative board paths", strings.Replace(base, `[[source]]`, "[daemon]\nsysfs = \"host/sys\"\nrootfs = \"\"\nprocfs = \"/host/proc\"\n\n[[source]]", 1),
			[]string{`:3:9: daemon.sysfs: "host/sys" must be an absolute path`}},
		{"preview without a listener", strings.Replace(base, `[[source]]`, "[daemon]\npreview = true\n\n[[source]]", 1),
			[]string{`:3:11: daemon.preview: the preview is served on daemon.metrics_listen, which is off`}},
		{"preview bounds", strings.Replace(base, `[[source]]`, "[daemon]\nmetrics_listen = \"127.0.0.1:9464\"\npreview = true\npreview_fps = 60.0\npreview_width = 16\npreview_clients = -1\n\n[[source]]", 1),
			[]string{`:5:15: daemon.preview_fps: 60: want more than 0 and at most 30 pictures a second`,
				`:6:17: daemon.preview_width: 16: want 32 to 7680 pixels`, `:7:19: daemon.preview_clients: -1: want 1 to 64 viewers of each picture`}},
		{"bad duration", strings.Replace(base, `[[source]]`, "[daemon]\nstop_timeout = \"soon\"\n\n[[source]]", 1),
			[]string{`:3:16: daemon.stop_timeout: `, `invalid duration "soon"`}},
		{"detector keys", strings.Replace(base, `[[sink]]`, "[[pipeline.postprocess]]\noutput = \"det\"\nkind = \"detections\"\nformat = \"yolo\"\noutputs = [\"a\", \"b\"]\n\n"+
			"[[pipeline.postprocess]]\noutput = \"class\"\nkind = \"topk\"\nformat = \"yolov8\"\nsigmoid = true\n\n[[sink]]", 1),
			[]string{`:21:10: pipeline[0].postprocess[0].format: "yolo" is not one of "auto", "yolov8", "yolov5", "end2end", "efficientnms", "rtdetr"`,
				`:22:11: pipeline[0].postprocess[0].outputs: does not list output "det"`,
				`:27:10: pipeline[0].postprocess[1].format: applies to kind = "detections" and "keypoints" only (this output is topk)`,
				`:28:11: pipeline[0].postprocess[1].sigmoid: applies to kind`}},
		{"keypoints kind", strings.Replace(base, `[[sink]]`, "[[pipeline.postprocess]]\noutput = \"pose\"\nkind = \"keypoints\"\nscore_threshold = 2.0\n\n[[sink]]", 1),
			[]string{`:21:19: pipeline[0].postprocess[0].score_threshold: must be between 0 and 1`}},
		{"tensorrt keys on an onnx model", strings.Replace(base, `path = "builtin:demo"`, "path = \"builtin:demo\"\ndla_core = 0\nplugins = [\"libx.so\"]", 1),
			[]string{`:11:12: model[0].dla_core: model "demo" runs on onnx; only TensorRT engines run on a DLA core`,
				`:12:11: model[0].plugins: model "demo" runs on onnx; plugins are TensorRT plugin libraries`}},
		{"dla core out of range", strings.Replace(base, `path = "builtin:demo"`, "path = \"m.engine\"\ndla_core = 9\nplugins = [\"a.so\", \"\", \"./a.so\"]", 1),
			[]string{`:11:12: model[0].dla_core: 9: want -1 (the GPU) or a DLA core number`, `:12:11: model[0].plugins: plugins[1] is empty`,
				`:12:11: model[0].plugins: plugins[2] is plugins[0] again`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, "edged.toml")
			if err := os.WriteFile(f, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(f)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("not a config error: %v", err)
			}
			msg := err.Error()
			rest := msg
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("message lacks %q:\n%s", w, msg)
				}
				rest = rest[i+len(w):]
			}
			if !strings.HasPrefix(msg, f) {
				t.Errorf("message does not start with the file name:\n%s", msg)
			}
		})
	}
}

// TestTypeErrorsReportedOnce: a value that does not decode is reported at
// its key, every other key is still decoded and checked, and nothing is
// said about the zero left in its place: not that the table misses it, not
// that a reference to its table's name dangles, not what its table's kind
// implies. The configuration decoded comes back with the problems.
func TestTypeErrorsReportedOnce(t *testing.T) {
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
	cases := []struct {
		name, from, to string
		keys           []string // the problems' keys, in order
	}{
		{"a name", `name = "cam0"`, `name = 0`, []string{"source[0].name"}},
		{"height", `height = 48`, `height = "48"`, []string{"source[0].height"}},
		{"a kind", `kind = "synthetic"`, `kind = 1`, []string{"source[0].kind"}},
		{"a list", `sinks = ["s"]`, `sinks = "s"`, []string{"pipeline[0].sinks"}},
		{"a table", "sinks = [\"s\"]\n", "sinks = [\"s\"]\npreprocess = 5\n", []string{"pipeline[0].preprocess"}},
		{"a sink name with other problems", "name = \"s\"\nkind = \"socket\"", "name = [\"s\"]\nkind = \"socket\"\nmode = \"0666\"\nqueue_len = 3",
			[]string{"sink[0].name", "sink[0].mode", "sink[0].queue_len"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := mustReplace(t, base, c.from, c.to)
			cfg, err := Parse("t.toml", []byte(text))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse: %v", err)
			}
			var keys []string
			for _, p := range ce.Problems {
				keys = append(keys, p.Key)
			}
			if !reflect.DeepEqual(keys, c.keys) {
				t.Fatalf("problems at %q, want %q:\n%v", keys, c.keys, err)
			}
			if cfg == nil || len(cfg.Pipelines) != 1 || cfg.Pipelines[0].Model != "demo" {
				t.Errorf("the configuration decoded does not come back with the problems: %+v", cfg)
			}
		})
	}
}

// mustReplace edits configuration text, failing the test when old is not
// there.
func mustReplace(t testing.TB, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("config edit: %q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestMissingModelFile(t *testing.T) {
	dir := t.TempDir()
	text := `
[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48
[[model]]
name = "m"
path = "models/none.onnx"
[[pipeline]]
name = "p"
source = "cam0"
model = "m"
sinks = ["s"]
[[sink]]
name = "s"
kind = "socket"
`
	f := filepath.Join(dir, "edged.toml")
	os.WriteFile(f, []byte(text), 0o644)
	cfg, err := LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.CheckFiles()
	want := f + ":9:8: model[0].path: model file " + filepath.Join(dir, "models/none.onnx") + ": no such file or directory"
	if err == nil || !errors.Is(err, ErrInvalid) || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	if got := cfg.Resolve("models/x.engine"); got != filepath.Join(dir, "models/x.engine") {
		t.Errorf("Resolve: %s", got)
	}
}

// Plugin libraries are checked with the model files: a regular ELF file,
// owned by root or edged's user, writable by no one else, within
// max_model_bytes; [gpu] tensorrt_plugins too when it is a path.
func TestPluginFiles(t *testing.T) {
	dir := t.TempDir()
	elf := append([]byte("\x7fELF"), make([]byte, 60)...)
	os.WriteFile(filepath.Join(dir, "m.engine"), []byte("ftrt"), 0o644)
	os.WriteFile(filepath.Join(dir, "libgood.so"), elf, 0o644)
	os.WriteFile(filepath.Join(dir, "libopen.so"), elf, 0o644)
	os.Chmod(filepath.Join(dir, "libopen.so"), 0o666)
	text := `
[gpu]
tensorrt_plugins = "nope/libnvinfer_plugin.so.10"
[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48
[[model]]
name = "m"
path = "m.engine"
plugins = ["libgood.so", "libopen.so", "missing.so"]
[[pipeline]]
name = "p"
source = "cam0"
model = "m"
sinks = ["s"]
[[sink]]
name = "s"
kind = "socket"
`
	f := filepath.Join(dir, "edged.toml")
	os.WriteFile(f, []byte(text), 0o644)
	cfg, err := LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.CheckFiles()
	if err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("accepted: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		f + ":3:20: gpu.tensorrt_plugins: trt: unusable plugin library: " + filepath.Join(dir, "nope/libnvinfer_plugin.so.10") + ": no such file or directory",
		f + ":12:11: model[0].plugins: plugins[1]: trt: unusable plugin library: " + filepath.Join(dir, "libopen.so") + ": mode 0666",
		f + ":12:11: model[0].plugins: plugins[2]: trt: unusable plugin library: " + filepath.Join(dir, "missing.so") + ": no such file",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "libgood.so") {
		t.Errorf("a good plugin was refused:\n%s", msg)
	}
}

// An MQTT sink's files are checked with the model files: each problem
// names the file, the line and the key.
func TestMQTTSinkFiles(t *testing.T) {
	dir := t.TempDir()
	text := `
[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48
[[model]]
name = "m"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam0"
model = "m"
sinks = ["s"]
[[sink]]
name = "s"
kind = "mqtt"
url = "mqtts://broker:8883"
username = "edged"
password_file = "secret/none"
ca_file = "ca.pem"
`
	f := filepath.Join(dir, "edged.toml")
	os.WriteFile(f, []byte(text), 0o644)
	os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("x"), 0o644)
	cfg, err := LoadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Sinks[0]; s.Topic != mqttsink.DefaultTopic || s.StatusTopic != mqttsink.DefaultStatusTopic || *s.QoS != 1 || s.QueueBytes != mqttsink.DefaultQueueBytes || s.Format != "ndjson" {
		t.Errorf("defaults: %+v", s)
	}
	err = cfg.CheckFiles()
	want := f + ":20:17: sink[0].password_file: password file " + filepath.Join(dir, "secret/none") + ": no such file or directory"
	if err == nil || !errors.Is(err, ErrInvalid) || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestConfigRoundTrip(t *testing.T) {
	cfg, err := Parse("", configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	text, err := Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("", []byte(text))
	if err != nil {
		t.Fatalf("printed configuration does not load:\n%v\n%s", err, text)
	}
	if !Equal(cfg, again) {
		t.Error("printed configuration differs after a round trip")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(configs.Default)
	f.Add([]byte("[[pipeline]]\nname = 1\n"))
	f.Add([]byte("[daemon]\nstop_timeout = \"1s\"\n[[source]]\n[[source.x]]\ny = {a = 1, b = [1,2]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.toml", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error is not a Error with problems: %v", err)
			}
			return
		}
		// An accepted configuration prints and reloads to the same thing.
		text, err := Encode(cfg)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, err := Parse("fuzz.toml", []byte(text))
		if err != nil {
			t.Fatalf("printed configuration rejected: %v\n%s", err, text)
		}
		if !Equal(cfg, again) {
			t.Fatalf("round trip changed the configuration")
		}
	})
}
