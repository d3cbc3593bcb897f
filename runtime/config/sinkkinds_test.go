package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
)

// sinkMessagesConfig has every problem a sink kind's keys can have, and
// one table of each kind with its keys left out.
const sinkMessagesConfig = `
[[sink]]
name = "nokind"

[[sink]]
name = "bad"
kind = "udp"

[[sink]]
name = "s1"
kind = "socket"
format = "xml"
mode = "0666"
max_clients = 2000
client_queue = 70000
write_timeout = "-1s"
max_clients_per_uid = 3000
keepalive = "10ms"

[[sink]]
name = "s2"
kind = "socket"
mode = "0999"

[[sink]]
name = "u1"
kind = "serial"
format = "json"
baud = -1
data_bits = 9
parity = "odd2"
stop_bits = 3
queue = 70000
max_frame_bytes = 10

[[sink]]
name = "m1"
kind = "mqtt"
format = "xml"
topic = "a/{x}/+"
status_topic = "s/{pipeline}"
qos = 2
client_id = ""
cert_file = "c.pem"
queue = 2000000
queue_bytes = 100
keepalive = "500ms"
connect_timeout = "-1s"
ack_timeout = "-1s"

[[sink]]
name = "m2"
kind = "mqtt"
url = "http://h"

[[sink]]
name = "m3"
kind = "mqtt"
url = "mqtt://"

[[sink]]
name = "m4"
kind = "mqtt"
url = "mqtt://u:p@h"

[[sink]]
name = "m5"
kind = "mqtt"
url = "mqtt://h"
ca_file = "ca.pem"
topic = "t/{device"

[[sink]]
name = "m6"
kind = "mqtt"
url = "::"
status_topic = ""
topic = "x#"

[[sink]]
name = "m7"
kind = "mqtt"
url = "mqtts://h:8883"
key_file = "k.pem"
status_topic = "s/{q}"
topic = "t/{q}"
`

// TestSinkKindMessages: the sink kinds' checks say what they said when
// the configuration held them, word for word and at the same
// file:line:col, every problem at once (the lines are those of the switch
// by kind that runtime/config had before the kinds' packages declared
// their keys).
func TestSinkKindMessages(t *testing.T) {
	_, err := Parse("k.toml", []byte(sinkMessagesConfig))
	if err == nil {
		t.Fatal("no error")
	}
	want := strings.TrimSpace(sinkMessagesWant)
	if got := err.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSinkPrintedByKind: edged config print writes a sink with its kind's
// keys, in the order Sink declares them, with their defaults.
func TestSinkPrintedByKind(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	c, err := Parse("k.toml", []byte(`
[[sink]]
name = "s"
kind = "socket"
path = "/run/edged/edged.sock"
[[sink]]
name = "u"
kind = "serial"
device = "/dev/ttyTHS0"
[[sink]]
name = "m"
kind = "mqtt"
url = "mqtt://broker:1883"
`))
	if c == nil {
		t.Fatal(err)
	}
	out, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, "[[sink]]")
	if i < 0 {
		t.Fatalf("no [[sink]] in\n%s", out)
	}
	if got, want := out[i:], strings.TrimLeft(sinkPrintWant, "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

const sinkMessagesWant = `
k.toml: no [[pipeline]] defined: edged needs at least one pipeline (source -> model -> sinks)
k.toml:2:1: sink[0]: missing kind ("socket", "serial" or "mqtt")
k.toml:7:8: sink[1].kind: "udp" is not one of "socket", "serial", "mqtt"
k.toml:12:10: sink[2].format: "xml" is not one of "ndjson", "cbor"
k.toml:13:8: sink[2].mode: 0666 lets every user on the machine write to the socket; use "0660" with a group
k.toml:14:15: sink[2].max_clients: must be between 1 and 1024
k.toml:15:16: sink[2].client_queue: must be between 1 and 65536
k.toml:16:17: sink[2].write_timeout: must be positive
k.toml:17:23: sink[2].max_clients_per_uid: must be between 1 and max_clients (2000)
k.toml:18:13: sink[2].keepalive: must be between 100ms and 1h
k.toml:23:8: sink[3].mode: invalid file mode "0999" (use octal permission bits such as "0660")
k.toml:25:1: sink[4].device: missing: a serial sink needs device = "/dev/ttyTHS0" or a stable /dev/serial/by-id/... path
k.toml:28:10: sink[4].format: "json" is not one of "cobs-cbor", "ndjson"
k.toml:29:8: sink[4].baud: must be positive
k.toml:30:13: sink[4].data_bits: must be between 5 and 8
k.toml:31:10: sink[4].parity: "odd2" is not one of "none", "odd", "even", "mark", "space"
k.toml:32:13: sink[4].stop_bits: must be 1 or 2
k.toml:33:9: sink[4].queue: must be between 1 and 65536
k.toml:34:19: sink[4].max_frame_bytes: must be between 64 and 1048576
k.toml:36:1: sink[5].url: missing: an mqtt sink needs url = "mqtt://host:1883" or "mqtts://host:8883"
k.toml:39:10: sink[5].format: "xml" is not one of "ndjson", "cbor"
k.toml:40:9: sink[5].topic: "a/{x}/+": unknown placeholder {x} (use {device}, {sink}, {pipeline})
k.toml:41:16: sink[5].status_topic: "s/{pipeline}": {pipeline} is not known here (status records may be about no pipeline)
k.toml:42:7: sink[5].qos: must be 0 or 1
k.toml:44:13: sink[5].cert_file: cert_file and key_file go together (a client certificate and its key)
k.toml:45:9: sink[5].queue: must be between 1 and 1048576
k.toml:46:15: sink[5].queue_bytes: must be at least 65536 (64 KiB): it bounds the on-disk queue, in bytes
k.toml:47:13: sink[5].keepalive: must be between 1s and 65535s
k.toml:48:19: sink[5].connect_timeout: must be positive
k.toml:49:15: sink[5].ack_timeout: must be positive
k.toml:54:7: sink[6].url: scheme "http" is not "mqtt" or "mqtts" (TLS)
k.toml:59:7: sink[7].url: "mqtt://" names no host
k.toml:64:7: sink[8].url: must not hold credentials: use username and password_file
k.toml:69:7: sink[9].url: ca_file, cert_file and key_file need TLS: use mqtts://
k.toml:71:9: sink[9].topic: "t/{device": unclosed {
k.toml:76:7: sink[10].url: "::" is not a URL
k.toml:78:9: sink[10].topic: "x#": a topic to publish to must not contain + or # (wildcards)
k.toml:80:1: sink[11].cert_file: cert_file and key_file go together (a client certificate and its key)
k.toml:85:16: sink[11].status_topic: "s/{q}": unknown placeholder {q} (use {device}, {sink})
k.toml:86:9: sink[11].topic: "t/{q}": unknown placeholder {q} (use {device}, {sink}, {pipeline})
`

const sinkPrintWant = `
[[sink]]
  name = "s"
  kind = "socket"
  format = "ndjson"
  path = "/run/edged/edged.sock"
  mode = "0660"
  group = ""
  max_clients = 64
  max_clients_per_uid = 32
  client_queue = 256
  write_timeout = "5s"
  allow_uids = []
  allow_gids = []
  keepalive = "10s"

[[sink]]
  name = "u"
  kind = "serial"
  format = "cobs-cbor"
  device = "/dev/ttyTHS0"
  baud = 115200
  data_bits = 8
  parity = "none"
  stop_bits = 1
  queue = 64
  max_frame_bytes = 1024

[[sink]]
  name = "m"
  kind = "mqtt"
  format = "ndjson"
  queue = 1024
  url = "mqtt://broker:1883"
  topic = "edged/{device}/{pipeline}/results"
  status_topic = "edged/{device}/status"
  qos = 1
  client_id = "edged-{device}-{sink}"
  username = ""
  password_file = ""
  ca_file = ""
  cert_file = ""
  key_file = ""
  queue_bytes = 67108864
  keepalive = "30s"
  connect_timeout = "10s"
  ack_timeout = "10s"
`

// TestSinkProperties: what a sink holds exclusively, whether it listens
// and whether its path was defaulted follow its kind.
func TestSinkProperties(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	c, _ := Parse("/etc/edged/k.toml", []byte(`
[[sink]]
name = "s"
kind = "socket"
[[sink]]
name = "t"
kind = "socket"
path = "e.sock"
[[sink]]
name = "u"
kind = "serial"
device = "tty0"
[[sink]]
name = "m"
kind = "mqtt"
url = "mqtt://h"
`))
	if c == nil {
		t.Fatal("not parsed")
	}
	want := []struct {
		holds              string
		listens, defaulted bool
	}{
		{"socket " + dir + "/edged.sock", true, true},
		{"socket /etc/edged/e.sock", true, false},
		{"serial /etc/edged/tty0", false, false},
		{"mqtt m", false, false},
	}
	for i, w := range want {
		s := &c.Sinks[i]
		if got := s.Holds(c); got != w.holds || s.Listens() != w.listens || s.PathDefaulted() != w.defaulted {
			t.Errorf("sink %s: holds %q listens %v defaulted %v, want %+v", s.Name, got, s.Listens(), s.PathDefaulted(), w)
		}
	}
	if (&Sink{Name: "x", Kind: "udp"}).Holds(c) != "udp x" {
		t.Error("an unknown kind holds more than its own name")
	}
}

// TestEverySinkKeyHasAKind: each field of Sink is name or kind, or a key
// some registered kind declares (a key no kind has would be accepted and
// ignored everywhere); a kind registered twice, with a key Sink lacks, or
// with a file key that is not one of its keys, is refused.
func TestEverySinkKeyHasAKind(t *testing.T) {
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Sink]()) {
		key := f.Tag.Get("toml")
		if key == "" || key == "-" || key == "name" || key == "kind" {
			continue
		}
		owned := false
		for _, k := range SinkKindNames() {
			owned = owned || isSinkKey(k, key)
		}
		if !owned {
			t.Errorf("[[sink]] key %s is no kind's", key)
		}
	}
	for name, k := range map[string]confkeys.SinkKind{
		"twice":       socketsink.SinkKind,
		"unknown key": {Name: "x1", New: func() confkeys.Keys { return new(badKeys) }},
		"file key":    {Name: "x2", New: func() confkeys.Keys { return new(mqttsink.Keys) }, Files: []confkeys.File{{Key: "path"}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			RegisterSinkKinds(k)
		}()
	}
	if got := SinkKindNames(); !slices.Equal(got, []string{socketsink.Kind, serialsink.Kind, mqttsink.Kind}) {
		t.Errorf("sink kinds %v after refused registrations", got)
	}
}

// TestSinkOfUnknownKindPrinted: config print shows a configuration with
// problems as far as it was understood; a sink of an unknown kind, or of
// none, shows the keys every sink kind has.
func TestSinkOfUnknownKindPrinted(t *testing.T) {
	c, _ := Parse("k.toml", []byte(`
[[sink]]
name = "a"
kind = "udp"
[[sink]]
name = "b"
format = "cbor"
`))
	if c == nil {
		t.Fatal("not parsed")
	}
	out, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	want := "[[sink]]\n  name = \"a\"\n  kind = \"udp\"\n  format = \"\"\n\n[[sink]]\n  name = \"b\"\n  kind = \"\"\n  format = \"cbor\"\n"
	if got := out[strings.Index(out, "[[sink]]"):]; got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
