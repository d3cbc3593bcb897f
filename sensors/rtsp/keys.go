package rtsp

import (
	"net/url"
	"time"

	"github.com/edged-dev/edged/internal/confkeys"
)

// SourceKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go).
var SourceKind = confkeys.Kind{Name: Kind, Camera: true, New: func() confkeys.Keys { return new(Keys) }}

// Keys are a network camera's keys in [[source]] (configs/edged.toml
// documents them): its size, codec and rate come from the stream.
type Keys struct {
	URL          string            `toml:"url"`
	Username     string            `toml:"username"`
	PasswordFile string            `toml:"password_file"`
	Transport    string            `toml:"transport"` // auto | tcp | udp
	Decoder      string            `toml:"decoder"`   // auto | cpu | nvdec | v4l2
	Timeout      confkeys.Duration `toml:"timeout"`

	// Keys of the other cameras, which it refuses.
	Width  int     `confkeys:"other" toml:"width"`
	Height int     `confkeys:"other" toml:"height"`
	Format string  `confkeys:"other" toml:"format"`
	FPS    float64 `confkeys:"other" toml:"fps"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	confkeys.Default(&k.Transport, TransportAuto)
	confkeys.Default(&k.Decoder, DecoderAuto)
	if k.Timeout.Duration == 0 {
		k.Timeout.Duration = DefaultTimeout
	}
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	switch u, err := url.Parse(k.URL); {
	case k.URL == "":
		p.Add("url", "missing: an rtsp source needs url = \"rtsp://host[:port]/path\"")
	case err != nil:
		p.Add("url", "%s does not parse as a URL", Redact(k.URL))
	case u.User != nil:
		// Never echo it: the user information may hold the password.
		p.Add("url", "must not hold credentials: use username and password_file (a file holding the password)")
	case u.Scheme != "rtsp" || u.Host == "":
		p.Add("url", "%s: want rtsp://host[:port]/path", Redact(k.URL))
	}
	if k.PasswordFile != "" && k.Username == "" {
		p.Add("password_file", "a password without a username: set username too")
	}
	confkeys.OneOf(p, "transport", k.Transport, TransportAuto, TransportTCP, TransportUDP)
	switch k.Decoder {
	case DecoderAuto, DecoderCPU, DecoderNVDEC, DecoderV4L2:
	default:
		p.Add("decoder", "%q is not one of \"auto\", \"cpu\", \"nvdec\", \"v4l2\"", k.Decoder)
	}
	if d := k.Timeout.Duration; d < 100*time.Millisecond || d > 10*time.Minute {
		p.Add("timeout", "%v: want 100ms to 10m", d)
	}
	for _, f := range []struct {
		key string
		set bool
	}{{"width", k.Width != 0}, {"height", k.Height != 0}, {"format", k.Format != ""}, {"fps", k.FPS != 0}} {
		if f.set {
			p.Add(f.key, "is not a key of an rtsp source: its size, codec and rate come from the stream (edged check shows them)")
		}
	}
}
