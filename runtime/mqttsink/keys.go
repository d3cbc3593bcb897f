package mqttsink

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/edged-dev/edged/internal/confkeys"
)

// SinkKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go): it holds its queue folder and client id,
// by its name, and the configuration reads the password and TLS files it
// names.
var SinkKind = confkeys.SinkKind{
	Name: Kind,
	New:  func() confkeys.Keys { return new(Keys) },
	Holds: func(name string, _ confkeys.Keys, _ func(string) string) string {
		return Kind + " " + name
	},
	Files: []confkeys.File{
		{Key: "password_file", Limit: confkeys.MaxPasswordFileBytes},
		{Key: "ca_file", Limit: confkeys.MaxPEMFileBytes},
		{Key: "cert_file", Limit: confkeys.MaxPEMFileBytes},
		{Key: "key_file", Limit: confkeys.MaxPEMFileBytes},
	},
}

// An MQTT sink's defaults in the configuration.
const (
	DefaultTopic       = "edged/{device}/{pipeline}/results"
	DefaultStatusTopic = "edged/{device}/status"
	DefaultClientID    = "edged-{device}-{sink}"
	DefaultQueue       = 1024
	DefaultQueueBytes  = 64 << 20
)

// Keys are an MQTT sink's keys in [[sink]] (configs/edged.toml documents
// them).
type Keys struct {
	Format         string            `toml:"format"`       // ndjson | cbor
	Queue          int               `toml:"queue"`        // records held in memory
	URL            string            `toml:"url"`          // mqtt://host:1883 | mqtts://host:8883
	Topic          string            `toml:"topic"`        // {device} {pipeline} {sink}
	StatusTopic    string            `toml:"status_topic"` // {device} {sink}
	QoS            *int              `toml:"qos"`          // 0 | 1 (default 1)
	ClientID       string            `toml:"client_id"`
	Username       string            `toml:"username"`
	PasswordFile   string            `toml:"password_file"`
	CAFile         string            `toml:"ca_file"`
	CertFile       string            `toml:"cert_file"`
	KeyFile        string            `toml:"key_file"`
	QueueBytes     int64             `toml:"queue_bytes"` // on-disk queue bound
	Keepalive      confkeys.Duration `toml:"keepalive"`   // MQTT keep-alive
	ConnectTimeout confkeys.Duration `toml:"connect_timeout"`
	AckTimeout     confkeys.Duration `toml:"ack_timeout"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	confkeys.Default(&k.Format, "ndjson")
	confkeys.Default(&k.Topic, DefaultTopic)
	confkeys.Default(&k.StatusTopic, DefaultStatusTopic)
	confkeys.Default(&k.ClientID, DefaultClientID)
	if k.QoS == nil {
		q := 1
		k.QoS = &q
	}
	if k.Queue == 0 {
		k.Queue = DefaultQueue
	}
	if k.QueueBytes == 0 {
		k.QueueBytes = DefaultQueueBytes
	}
	if k.Keepalive.Duration == 0 {
		k.Keepalive.Duration = 30 * time.Second
	}
	if k.ConnectTimeout.Duration == 0 {
		k.ConnectTimeout.Duration = 10 * time.Second
	}
	if k.AckTimeout.Duration == 0 {
		k.AckTimeout.Duration = 10 * time.Second
	}
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	k.checkURL(p)
	confkeys.OneOf(p, "format", k.Format, "ndjson", "cbor")
	if err := CheckTopic(k.Topic, true); err != nil {
		p.Add("topic", "%v", err)
	}
	if err := CheckTopic(k.StatusTopic, false); err != nil {
		p.Add("status_topic", "%v", err)
	}
	if k.QoS != nil && *k.QoS != 0 && *k.QoS != 1 {
		p.Add("qos", "must be 0 or 1")
	}
	if k.ClientID == "" {
		p.Add("client_id", "must not be empty")
	}
	if (k.CertFile == "") != (k.KeyFile == "") {
		p.Add("cert_file", "cert_file and key_file go together (a client certificate and its key)")
	}
	if k.Queue < 1 || k.Queue > 1<<20 {
		p.Add("queue", "must be between 1 and 1048576")
	}
	if k.QueueBytes < 64<<10 {
		p.Add("queue_bytes", "must be at least 65536 (64 KiB): it bounds the on-disk queue, in bytes")
	}
	if k.Keepalive.Duration < time.Second || k.Keepalive.Duration > 65535*time.Second {
		p.Add("keepalive", "must be between 1s and 65535s")
	}
	if k.ConnectTimeout.Duration <= 0 {
		p.Add("connect_timeout", "must be positive")
	}
	if k.AckTimeout.Duration <= 0 {
		p.Add("ack_timeout", "must be positive")
	}
}

func (k *Keys) checkURL(p confkeys.Problems) {
	switch u, err := url.Parse(k.URL); {
	case k.URL == "":
		p.Add("url", "missing: an mqtt sink needs url = \"mqtt://host:1883\" or \"mqtts://host:8883\"")
	case err != nil:
		p.Add("url", "%q is not a URL", k.URL)
	case u.Scheme != "mqtt" && u.Scheme != "mqtts":
		p.Add("url", "scheme %q is not \"mqtt\" or \"mqtts\" (TLS)", u.Scheme)
	case u.Hostname() == "":
		p.Add("url", "%q names no host", k.URL)
	case u.User != nil:
		p.Add("url", "must not hold credentials: use username and password_file")
	case u.Scheme == "mqtt" && (k.CAFile != "" || k.CertFile != "" || k.KeyFile != ""):
		p.Add("url", "ca_file, cert_file and key_file need TLS: use mqtts://")
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
