package rtsp

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// Kind is the source kind's name in configuration files.
const Kind = "rtsp"

// Transports.
const (
	// TransportAuto tries UDP and falls back to TCP (no UDP packet within
	// 3 s, or a server that refuses UDP); once it fell back, the source's
	// later sessions use TCP straight away.
	TransportAuto = "auto"
	TransportTCP  = "tcp"
	TransportUDP  = "udp"
)

// Decoders a configuration may name (the source's decoder key); which of
// them a build and a machine have is the wiring's business (cmd/edged).
const (
	DecoderAuto  = "auto"
	DecoderCPU   = "cpu"
	DecoderNVDEC = "nvdec"
	DecoderV4L2  = "v4l2"
)

// Defaults.
const (
	// DefaultTimeout bounds the TCP connect, each RTSP request, and the
	// time without video before a session counts as dead.
	DefaultTimeout = 5 * time.Second
	// DefaultBuffers is how many access units may wait between the network
	// and the decoder: about a second at 30 frames a second, so a decoder
	// starved of CPU for a moment (a loaded machine, a GC pause) catches
	// up instead of losing the rest of a GOP. Each buffer grows to the
	// largest access unit it held (a 1080p key picture at 4 Mb/s: about
	// 150 KB).
	DefaultBuffers = 32
)

// Errors of this package; each wraps the sensors sentinel the capture loop
// reacts to.
var (
	// ErrUnauthorized: the camera refused the credentials (401).
	ErrUnauthorized = errors.New("rtsp: unauthorized")
	// ErrNoVideo: the stream has no H.264 or H.265 video.
	ErrNoVideo = errors.New("rtsp: no H.264 or H.265 video in the stream")
	// ErrStalled: the session is open but no video came for the timeout.
	ErrStalled = errors.New("rtsp: no video")
)

// Decoder decodes one stream's access units into NV12 pictures (a decoder
// package: sensors/avcodec). Its methods are called from one goroutine at
// a time.
type Decoder interface {
	// Send gives it one Annex-B access unit; id comes back with the
	// picture (decoders may hold pictures back and reorder them). The
	// bytes may be reused once Send returns.
	Send(au []byte, id uint64) error
	// Receive reports the next decoded picture, if one is ready: its id
	// and the layout Write will give it (NV12). The source calls it until
	// it reports none before the next Send.
	Receive() (id uint64, f sensors.Format, ok bool, err error)
	// Write writes the picture Receive reported into dst (at least the
	// format's FrameSize); corrupt: the decoder flagged it.
	Write(dst []byte) (corrupt bool, err error)
	// Describe names the decoder for logs and edged check.
	Describe() string
	Close() error
}

// DeviceWriter is a Decoder whose pictures are in GPU memory
// (sensors/nvdec): it copies the picture Receive reported, device to
// device, into n bytes the GPU addresses at dst. The source writes through
// it into slots that have a device address (a method Device() uintptr that
// is not 0, and Size() int: umem's frame slots), so a picture never passes
// through the host; other slots get Write.
type DeviceWriter interface {
	WriteDevice(dst uintptr, n int) (corrupt bool, err error)
}

// deviceSlot is a slot the GPU addresses (umem's frame slots).
type deviceSlot interface {
	Device() uintptr
	Size() int
}

// NewDecoder makes a decoder for codec c; params are the stream's
// parameter sets as Annex-B (from the SDP), nil when they come in band. It
// must return a nil Decoder with its error.
type NewDecoder func(c h26x.Codec, params []byte) (Decoder, error)

// Options configure a source.
type Options struct {
	Name string
	// URL is rtsp://host[:port]/path, without credentials.
	URL string
	// Username and Password are the camera's credentials (Password: the
	// contents of the password file); empty: none.
	Username, Password string
	// Transport is TransportAuto (the default), TransportTCP or
	// TransportUDP.
	Transport string
	// Timeout: see DefaultTimeout.
	Timeout time.Duration
	// Buffers: see DefaultBuffers.
	Buffers int
	// UDPReadBuffer is the UDP sockets' receive buffer in bytes (0: the
	// system's default, which the kernel caps at net.core.rmem_max).
	UDPReadBuffer int
	// Decoder makes each session's decoder. Required by Start (Probe needs
	// none).
	Decoder NewDecoder
}

// Redact returns an RTSP URL with any credentials and query removed, for
// messages: scheme, host and path.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an unreadable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// userinfo matches credentials inside a URL in a message.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@`)

// scrub removes credentials from a message: any URL's user information,
// and the password itself wherever it appears.
func scrub(msg, password string) string {
	msg = userinfo.ReplaceAllString(msg, "$1")
	if len(password) >= 3 {
		msg = strings.ReplaceAll(msg, password, "***")
	}
	return msg
}

// parse checks the options and returns the URL (no credentials), with
// defaults applied to o.
func (o *Options) parse() (*url.URL, error) {
	name := fmt.Sprintf("rtsp %q", o.Name)
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: url %s does not parse", name, Redact(o.URL))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s: url %s carries credentials: put the user in username and the password in a password file (password_file)", name, Redact(o.URL))
	}
	if u.Scheme != "rtsp" || u.Host == "" {
		return nil, fmt.Errorf("%s: url %s: want rtsp://host[:port]/path", name, Redact(o.URL))
	}
	if o.Password != "" && o.Username == "" {
		return nil, fmt.Errorf("%s: a password without a username", name)
	}
	switch o.Transport {
	case "":
		o.Transport = TransportAuto
	case TransportAuto, TransportTCP, TransportUDP:
	default:
		return nil, fmt.Errorf("%s: transport %q: want %q, %q or %q", name, o.Transport, TransportAuto, TransportTCP, TransportUDP)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 100*time.Millisecond || o.Timeout > 10*time.Minute {
		return nil, fmt.Errorf("%s: timeout %v: want 100ms to 10m", name, o.Timeout)
	}
	if o.Buffers == 0 {
		o.Buffers = DefaultBuffers
	}
	if o.Buffers < 2 || o.Buffers > 64 {
		return nil, fmt.Errorf("%s: buffers %d: want 2 to 64", name, o.Buffers)
	}
	if o.UDPReadBuffer < 0 {
		return nil, fmt.Errorf("%s: udp read buffer %d: want 0 or more bytes", name, o.UDPReadBuffer)
	}
	return u, nil
}
