package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/edged-dev/edged/sensors/rtsp"
)

// The network camera kind's keys (kind = "rtsp"): their defaults and their
// checks. configs/edged.toml documents them.

// DefaultRTSPTimeout is an rtsp source's timeout: the TCP connect, each
// RTSP request, and how long a session may send no video before it counts
// as dead.
const DefaultRTSPTimeout = rtsp.DefaultTimeout

func (s *Source) rtspDefaults() {
	def(&s.Transport, rtsp.TransportAuto)
	def(&s.Decoder, rtsp.DecoderAuto)
	if s.Timeout.Duration == 0 {
		s.Timeout.Duration = DefaultRTSPTimeout
	}
}

// checkRTSP checks an rtsp source's keys; at names a key of it.
func (c *Config) checkRTSP(k *checker, s *Source, at func(string) string) {
	switch u, err := url.Parse(s.URL); {
	case s.URL == "":
		k.add(at("url"), "missing: an rtsp source needs url = \"rtsp://host[:port]/path\"")
	case err != nil:
		k.add(at("url"), "%s does not parse as a URL", rtsp.Redact(s.URL))
	case u.User != nil:
		// Never echo it: the user information may hold the password.
		k.add(at("url"), "must not hold credentials: use username and password_file (a file holding the password)")
	case u.Scheme != "rtsp" || u.Host == "":
		k.add(at("url"), "%s: want rtsp://host[:port]/path", rtsp.Redact(s.URL))
	}
	if s.PasswordFile != "" && s.Username == "" {
		k.add(at("password_file"), "a password without a username: set username too")
	}
	k.oneOf(at("transport"), s.Transport, rtsp.TransportAuto, rtsp.TransportTCP, rtsp.TransportUDP)
	switch s.Decoder {
	case rtsp.DecoderAuto, rtsp.DecoderCPU, rtsp.DecoderNVDEC, rtsp.DecoderV4L2:
	default:
		k.add(at("decoder"), "%q is not one of \"auto\", \"cpu\", \"nvdec\", \"v4l2\"", s.Decoder)
	}
	if d := s.Timeout.Duration; d < 100*time.Millisecond || d > 10*time.Minute {
		k.add(at("timeout"), "%v: want 100ms to 10m", d)
	}
	// Keys of other cameras that a network camera takes from its stream.
	for _, f := range []struct {
		key string
		set bool
	}{{"width", s.Width != 0}, {"height", s.Height != 0}, {"format", s.Format != ""}, {"fps", s.FPS != 0}} {
		if f.set {
			k.add(at(f.key), "is not a key of an rtsp source: its size, codec and rate come from the stream (edged check shows them)")
		}
	}
}

// checkRTSPFiles checks that each rtsp source's password file can be read
// (CheckFiles).
func (c *Config) checkRTSPFiles(k *checker) {
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.Kind != rtsp.Kind || s.PasswordFile == "" {
			continue
		}
		if _, err := c.ReadNamed(s.PasswordFile, MaxPasswordFileBytes); err != nil {
			k.add(fmt.Sprintf("source[%d].password_file", i), "password file %s: %v", c.Resolve(s.PasswordFile), errCause(err))
		}
	}
}

// SourceFiles identifies the content of the files source s names (a
// network camera's password file), as this configuration read them, as
// SinkFiles does for sinks: a reload that only changes what such a file
// holds restarts the pipelines of the source with it.
func (c *Config) SourceFiles(s *Source) string {
	if s == nil || s.Kind != rtsp.Kind || s.PasswordFile == "" {
		return ""
	}
	f := c.named(c.Resolve(s.PasswordFile), MaxPasswordFileBytes)
	if f.err != nil {
		return "password_file=error " + f.err.Error()
	}
	return "password_file=" + hex.EncodeToString(f.sum[:])
}
