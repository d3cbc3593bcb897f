package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/serialsrc"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/sensors/v4l2"
)

// The source and sink kinds as the binary registers them (cmd/edged/kinds.go, whose
// tests hold the two lists equal).
func init() {
	RegisterSourceKinds(v4l2.SourceKind, synthetic.SourceKind, replay.SourceKind, rtsp.SourceKind, serialsrc.SourceKind)
	RegisterSinkKinds(socketsink.SinkKind, serialsink.SinkKind, mqttsink.SinkKind)
}

// TestEverySourceKeyHasAKind: each field of Source is name, kind or
// optional, or a key some registered kind declares its own (a key that no
// kind has would be accepted and ignored everywhere), and config print
// writes a source with exactly its kind's keys.
func TestEverySourceKeyHasAKind(t *testing.T) {
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Source]()) {
		key := f.Tag.Get("toml")
		if key == "" || key == "-" || key == "name" || key == "kind" || key == "optional" {
			continue
		}
		var owners []string
		for _, k := range SourceKindNames() {
			if isSourceKey(k, key) {
				owners = append(owners, k)
			}
		}
		if len(owners) == 0 {
			t.Errorf("[[source]] key %s is no kind's", key)
		}
	}
	// What the kinds say about the keys a kind only refuses.
	if isSourceKey(rtsp.Kind, "width") || !isSourceKey(synthetic.Kind, "width") || isSourceKey(v4l2.Kind, "free_run") || !isSourceKey(replay.Kind, "free_run") {
		t.Error("a key a kind refuses (confkeys:\"other\") counts as its own, or one it has does not")
	}
	if !IsCamera(rtsp.Kind) || IsCamera(serialsrc.Kind) || IsCamera("nope") || !isSensor(serialsrc.Kind) || isSensor("nope") {
		t.Error("IsCamera/isSensor do not follow the kinds registered")
	}
	if got, want := sourceKindNames(true, false, " or "), "v4l2, synthetic, replay or rtsp"; got != want {
		t.Errorf("cameras listed %q, want %q", got, want)
	}
}

// TestRegisterSourceKindRefusesMismatch: a kind whose key Source lacks, or
// has with another type, or a kind registered twice, is a programming error
// found when the binary starts.
func TestRegisterSourceKindRefusesMismatch(t *testing.T) {
	for name, k := range map[string]confkeys.Kind{
		"twice":        v4l2.SourceKind,
		"unknown key":  {Name: "x1", New: func() confkeys.Keys { return new(badKeys) }},
		"another type": {Name: "x2", New: func() confkeys.Keys { return new(badTypeKeys) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			RegisterSourceKinds(k)
		}()
	}
	if n := len(SourceKindNames()); n != 5 {
		t.Errorf("%d kinds after refused registrations, want 5", n)
	}
}

type badKeys struct {
	Lens string `toml:"lens"`
}

func (*badKeys) Defaults()               {}
func (*badKeys) Check(confkeys.Problems) {}

type badTypeKeys struct {
	Width string `toml:"width"`
}

func (*badTypeKeys) Defaults()               {}
func (*badTypeKeys) Check(confkeys.Problems) {}

// kindMessagesConfig has a problem with every key a source kind checks.
const kindMessagesConfig = `
[[source]]
name = "a"

[[source]]
name = "b"
kind = "gige"

[[source]]
name = "c"
kind = "v4l2"
period = -1
free_run = true
buffers = 1
io = "dma"

[[source]]
name = "d"
kind = "synthetic"
width = 10
height = 20000
fps = 2000.0
free_run = true
format = "RGBA"

[[source]]
name = "e"
kind = "replay"
fps = -1.0
period = -3

[[source]]
name = "f"
kind = "serial"
protocol = "csv"
baud = -1
ring = 70000

[[source]]
name = "g"
kind = "rtsp"
url = "http://x/y"
timeout = "1ms"
width = 640
fps = 5.0
transport = "sctp"
decoder = "x"
password_file = "p"

[[source]]
name = "h"
kind = "rtsp"
url = "rtsp://user:secret@cam/1"

[[source]]
name = "i"
kind = "serial"
device = "/dev/ttyUSB0"
protocol = "nmea"

[[pipeline]]
name = "p"
source = "i"
sensors = ["d"]
`

// TestSourceKindMessages: the kinds' checks say what they said when the
// configuration held them, word for word and at the same file:line:col,
// every problem at once (the lines were those of the switch by kind that
// runtime/config had before the kinds' packages declared their keys).
func TestSourceKindMessages(t *testing.T) {
	_, err := Parse("k.toml", []byte(kindMessagesConfig))
	if err == nil {
		t.Fatal("no error")
	}
	want := `k.toml:2:1: source[0]: missing kind ("v4l2", "synthetic", "replay", "rtsp" or "serial")
k.toml:7:8: source[1].kind: "gige" is not one of "v4l2", "synthetic", "replay", "rtsp", "serial"
k.toml:9:1: source[2].device: missing: a V4L2 source needs device = "/dev/videoN" or a stable /dev/v4l/by-id/... path
k.toml:9:1: source[2].width: missing: a v4l2 source needs width and height (the frame size in pixels)
k.toml:12:10: source[2].period: must not be negative
k.toml:13:12: source[2].free_run: is for replay sources (a v4l2 source: fps = 0 is the device's default rate)
k.toml:14:11: source[2].buffers: must be between 2 and 32
k.toml:15:6: source[2].io: "dma" is not one of "auto", "userptr", "mmap"
k.toml:21:10: source[3].height: width and height must be between 1 and 16384 (got 10x20000)
k.toml:22:7: source[3].fps: must be between 0 (as fast as the pipeline takes frames) and 1000 frames per second
k.toml:23:12: source[3].free_run: is for replay sources (a synthetic source: fps = 0 is as fast as the pipeline takes frames)
k.toml:24:10: source[3].format: "RGBA" is not one of "YUYV", "UYVY", "NV12", "GREY", "RGB24", "BGR24", "MJPEG"
k.toml:26:1: source[4].path: missing: a replay source needs path = a recording file or an image folder
k.toml:29:7: source[4].fps: must be between 0 (the recorded pace; free_run = true plays every frame at once) and 1000 frames per second
k.toml:30:10: source[4].period: must not be negative
k.toml:32:1: source[5].device: missing: a serial source needs device = "/dev/ttyUSB0" or a stable /dev/serial/by-id/... path
k.toml:32:1: source[5].columns: missing: protocol "csv" needs columns = ["ax", "ay", ...] naming the values
k.toml:36:8: source[5].baud: must be positive
k.toml:37:8: source[5].ring: must be between 1 and 65536
k.toml:42:7: source[6].url: http://x/y: want rtsp://host[:port]/path
k.toml:43:11: source[6].timeout: 1ms: want 100ms to 10m
k.toml:44:9: source[6].width: is not a key of an rtsp source: its size, codec and rate come from the stream (edged check shows them)
k.toml:45:7: source[6].fps: is not a key of an rtsp source: its size, codec and rate come from the stream (edged check shows them)
k.toml:46:13: source[6].transport: "sctp" is not one of "auto", "tcp", "udp"
k.toml:47:11: source[6].decoder: "x" is not one of "auto", "cpu", "nvdec", "v4l2"
k.toml:48:17: source[6].password_file: a password without a username: set username too
k.toml:53:7: source[7].url: must not hold credentials: use username and password_file (a file holding the password)
k.toml:61:1: pipeline[0]: missing model
k.toml:61:1: pipeline[0]: missing sinks (a list of [[sink]] names)
k.toml:63:10: pipeline[0].source: source "i" is a serial sensor; a pipeline's source must be a camera (v4l2, synthetic, replay or rtsp) — list serial sensors in sensors = [...]
k.toml:64:12: pipeline[0].sensors[0]: source "d" is a synthetic camera, not a serial sensor`
	if got := err.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSourcePrintedByKind: edged config print writes a source with its
// kind's keys (kinds.go), in the order Source declares them.
func TestSourcePrintedByKind(t *testing.T) {
	c, err := Parse("k.toml", []byte(`
[[source]]
name = "c"
kind = "v4l2"
device = "/dev/video0"
width = 640
height = 480
[[source]]
name = "d"
kind = "synthetic"
width = 64
height = 48
[[source]]
name = "e"
kind = "replay"
path = "x.rec"
[[source]]
name = "f"
kind = "serial"
device = "/dev/ttyUSB0"
[[source]]
name = "g"
kind = "rtsp"
url = "rtsp://cam/1"
`))
	if c == nil {
		t.Fatal(err) // a configuration without pipelines, as far as it was understood, is enough
	}
	out, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`  name = "c"
  kind = "v4l2"
  device = "/dev/video0"
  optional = false
  width = 640
  height = 480
  format = "YUYV"
  fps = 0.0
  buffers = 4
  io = "auto"`, `  name = "g"
  kind = "rtsp"
  optional = false
  url = "rtsp://cam/1"
  username = ""
  password_file = ""
  transport = "auto"
  decoder = "auto"
  timeout = "5s"`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("config print lacks\n%s\nin\n%s", want, out)
		}
	}
}
