package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The [[sink]] tables: each kind's defaults and the checks of its keys.
// The kinds are the sink packages' (runtime/socketsink, runtime/serialsink,
// runtime/mqttsink), which the configuration does not import.

// defaults fills a [[sink]] table by its kind.
func (s *Sink) defaults() {
	switch s.Kind {
	case "socket":
		s.socketDefaults()
	case "serial":
		s.serialDefaults()
	case "mqtt":
		s.mqttDefaults()
	}
}

// socketDefaults fills a socket sink's keys.
func (s *Sink) socketDefaults() {
	s.pathDefaulted = s.Path == ""
	def(&s.Path, DefaultSocketPath())
	def(&s.Format, "ndjson")
	def(&s.Mode, DefaultMode)
	if s.MaxClients == 0 {
		s.MaxClients = DefaultMaxClients
	}
	if s.ClientQueue == 0 {
		s.ClientQueue = DefaultClientQueue
	}
	if s.WriteTimeout.Duration == 0 {
		s.WriteTimeout.Duration = DefaultWriteTimeout
	}
	if s.Keepalive.Duration == 0 {
		s.Keepalive.Duration = DefaultKeepalive
	}
	if s.MaxClientsPerUID == 0 {
		s.MaxClientsPerUID = max(1, s.MaxClients/2)
	}
}

// serialDefaults fills a serial sink's keys.
func (s *Sink) serialDefaults() {
	def(&s.Format, "cobs-cbor")
	if s.Baud == 0 {
		s.Baud = DefaultBaud
	}
	if s.DataBits == 0 {
		s.DataBits = 8
	}
	def(&s.Parity, "none")
	if s.StopBits == 0 {
		s.StopBits = 1
	}
	if s.Queue == 0 {
		s.Queue = DefaultSerialQueue
	}
	if s.MaxFrameBytes == 0 {
		s.MaxFrameBytes = DefaultMaxFrameBytes
	}
}

// mqttDefaults fills an MQTT sink's keys.
func (s *Sink) mqttDefaults() {
	def(&s.Format, "ndjson")
	def(&s.Topic, DefaultMQTTTopic)
	def(&s.StatusTopic, DefaultMQTTStatusTopic)
	def(&s.ClientID, DefaultMQTTClientID)
	if s.QoS == nil {
		q := 1
		s.QoS = &q
	}
	if s.Queue == 0 {
		s.Queue = DefaultMQTTQueue
	}
	if s.QueueBytes == 0 {
		s.QueueBytes = DefaultMQTTQueueBytes
	}
	if s.Keepalive.Duration == 0 {
		s.Keepalive.Duration = 30 * time.Second
	}
	if s.ConnectTimeout.Duration == 0 {
		s.ConnectTimeout.Duration = 10 * time.Second
	}
	if s.AckTimeout.Duration == 0 {
		s.AckTimeout.Duration = 10 * time.Second
	}
}

// MQTT sink defaults.
const (
	DefaultMQTTTopic       = "edged/{device}/{pipeline}/results"
	DefaultMQTTStatusTopic = "edged/{device}/status"
	DefaultMQTTClientID    = "edged-{device}-{sink}"
	DefaultMQTTQueue       = 1024
	DefaultMQTTQueueBytes  = 64 << 20
)

// Holds names what sink s of c holds exclusively, so that a reload builds
// a sink that takes it over only after the one holding it stopped: its
// socket's path, its serial device, its MQTT queue folder and client id
// (by its name).
func (s *Sink) Holds(c *Config) string {
	switch s.Kind {
	case "socket":
		return "socket " + c.Resolve(s.Path)
	case "mqtt":
		return "mqtt " + s.Name
	case "serial":
		return "serial " + c.Resolve(s.Device)
	}
	return s.Kind + " " + s.Name // unknown kinds: only their own replacement waits
}

// Listens reports whether s listens on a Unix socket, which systemd's
// socket activation may pass it (a socket sink).
func (s *Sink) Listens() bool { return s.Kind == "socket" }

// DefaultSocketPath is where a socket sink with no path listens:
// $XDG_RUNTIME_DIR/edged.sock, else edged.sock in the working directory.
func DefaultSocketPath() string {
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return filepath.Join(dir, "edged.sock")
		}
	}
	if abs, err := filepath.Abs("edged.sock"); err == nil {
		return abs
	}
	return "edged.sock"
}

func (c *Config) checkSink(k *checker, i int) {
	s := &c.Sinks[i]
	at := func(key string) string { return fmt.Sprintf("sink[%d].%s", i, key) }
	switch s.Kind {
	case "socket":
		checkSocketSink(k, s, at)
	case "serial":
		checkSerialSink(k, s, at)
	case "mqtt":
		c.checkMQTTSink(k, s, at)
	case "":
		k.add(fmt.Sprintf("sink[%d]", i), "missing kind (\"socket\", \"serial\" or \"mqtt\")")
	default:
		k.add(at("kind"), "%q is not one of \"socket\", \"serial\", \"mqtt\"", s.Kind)
	}
}

// checkSocketSink checks a socket sink's keys; at names them.
func checkSocketSink(k *checker, s *Sink, at func(string) string) {
	k.oneOf(at("format"), s.Format, "ndjson", "cbor")
	if m, err := ParseMode(s.Mode); err != nil {
		k.add(at("mode"), "%v", err)
	} else if m&0o002 != 0 {
		k.add(at("mode"), "%s lets every user on the machine write to the socket; use \"0660\" with a group", s.Mode)
	}
	if s.MaxClients < 1 || s.MaxClients > 1024 {
		k.add(at("max_clients"), "must be between 1 and 1024")
	}
	if s.ClientQueue < 1 || s.ClientQueue > 65536 {
		k.add(at("client_queue"), "must be between 1 and 65536")
	}
	if s.WriteTimeout.Duration <= 0 {
		k.add(at("write_timeout"), "must be positive")
	}
	if s.MaxClientsPerUID < 1 || s.MaxClientsPerUID > max(s.MaxClients, 1) {
		k.add(at("max_clients_per_uid"), "must be between 1 and max_clients (%d)", s.MaxClients)
	}
	if s.Keepalive.Duration < 100*time.Millisecond || s.Keepalive.Duration > time.Hour {
		k.add(at("keepalive"), "must be between 100ms and 1h")
	}
}

// checkSerialSink checks a serial sink's keys; at names them.
func checkSerialSink(k *checker, s *Sink, at func(string) string) {
	if s.Device == "" {
		k.add(at("device"), "missing: a serial sink needs device = \"/dev/ttyTHS0\" or a stable /dev/serial/by-id/... path")
	}
	k.oneOf(at("format"), s.Format, "cobs-cbor", "ndjson")
	if s.Baud <= 0 {
		k.add(at("baud"), "must be positive")
	}
	if s.DataBits < 5 || s.DataBits > 8 {
		k.add(at("data_bits"), "must be between 5 and 8")
	}
	k.oneOf(at("parity"), s.Parity, "none", "odd", "even", "mark", "space")
	if s.StopBits != 1 && s.StopBits != 2 {
		k.add(at("stop_bits"), "must be 1 or 2")
	}
	if s.Queue < 1 || s.Queue > 65536 {
		k.add(at("queue"), "must be between 1 and 65536")
	}
	if s.MaxFrameBytes < 64 || s.MaxFrameBytes > 1<<20 {
		k.add(at("max_frame_bytes"), "must be between 64 and 1048576")
	}
}

func (c *Config) checkMQTTSink(k *checker, s *Sink, at func(string) string) {
	switch u, err := url.Parse(s.URL); {
	case s.URL == "":
		k.add(at("url"), "missing: an mqtt sink needs url = \"mqtt://host:1883\" or \"mqtts://host:8883\"")
	case err != nil:
		k.add(at("url"), "%q is not a URL", s.URL)
	case u.Scheme != "mqtt" && u.Scheme != "mqtts":
		k.add(at("url"), "scheme %q is not \"mqtt\" or \"mqtts\" (TLS)", u.Scheme)
	case u.Hostname() == "":
		k.add(at("url"), "%q names no host", s.URL)
	case u.User != nil:
		k.add(at("url"), "must not hold credentials: use username and password_file")
	case u.Scheme == "mqtt" && (s.CAFile != "" || s.CertFile != "" || s.KeyFile != ""):
		k.add(at("url"), "ca_file, cert_file and key_file need TLS: use mqtts://")
	}
	k.oneOf(at("format"), s.Format, "ndjson", "cbor")
	if err := CheckTopic(s.Topic, true); err != nil {
		k.add(at("topic"), "%v", err)
	}
	if err := CheckTopic(s.StatusTopic, false); err != nil {
		k.add(at("status_topic"), "%v", err)
	}
	if s.QoS != nil && *s.QoS != 0 && *s.QoS != 1 {
		k.add(at("qos"), "must be 0 or 1")
	}
	if s.ClientID == "" {
		k.add(at("client_id"), "must not be empty")
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		k.add(at("cert_file"), "cert_file and key_file go together (a client certificate and its key)")
	}
	if s.Queue < 1 || s.Queue > 1<<20 {
		k.add(at("queue"), "must be between 1 and 1048576")
	}
	if s.QueueBytes < 64<<10 {
		k.add(at("queue_bytes"), "must be at least 65536 (64 KiB): it bounds the on-disk queue, in bytes")
	}
	if s.Keepalive.Duration < time.Second || s.Keepalive.Duration > 65535*time.Second {
		k.add(at("keepalive"), "must be between 1s and 65535s")
	}
	if s.ConnectTimeout.Duration <= 0 {
		k.add(at("connect_timeout"), "must be positive")
	}
	if s.AckTimeout.Duration <= 0 {
		k.add(at("ack_timeout"), "must be positive")
	}
}

// CheckTopic checks an MQTT topic template: placeholders {device},
// {sink} and (when pipeline is true) {pipeline}; no wildcards.
func CheckTopic(t string, pipeline bool) error {
	if t == "" {
		return errors.New("must not be empty")
	}
	rest := t
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("%q: unclosed {", t)
		}
		switch name := rest[i+1 : i+j]; name {
		case "device", "sink":
		case "pipeline":
			if !pipeline {
				return fmt.Errorf("%q: {pipeline} is not known here (status records may be about no pipeline)", t)
			}
		default:
			return fmt.Errorf("%q: unknown placeholder {%s} (use {device}, {sink}%s)", t, name, map[bool]string{true: ", {pipeline}"}[pipeline])
		}
		rest = rest[i+j+1:]
	}
	if strings.ContainsAny(t, "+#\x00") {
		return fmt.Errorf("%q: a topic to publish to must not contain + or # (wildcards)", t)
	}
	return nil
}
