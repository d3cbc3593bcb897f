package rtsptest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gortsplib/v5"
	"github.com/bluenviron/gortsplib/v5/pkg/base"
	"github.com/bluenviron/gortsplib/v5/pkg/description"
	"github.com/bluenviron/gortsplib/v5/pkg/format"
	"github.com/bluenviron/gortsplib/v5/pkg/format/rtph264"
	"github.com/bluenviron/gortsplib/v5/pkg/format/rtph265"
	"github.com/bluenviron/gortsplib/v5/pkg/liberrors"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
)

// FileOptions configure a FileServer.
type FileOptions struct {
	Codec h26x.Codec
	// AUs are the access units it loops (Annex-B, h26xtest.ReadAccessUnits).
	AUs [][]byte
	// FPS paces them (default 30).
	FPS float64
	// Address is where it listens ("" = 127.0.0.1 on a free port); UDP
	// also offers UDP transport, on two free ports.
	Address string
	UDP     bool
	// User and Password, when set, are required (basic or digest).
	User, Password string
	// NoSenderReports: send no RTCP sender reports.
	NoSenderReports bool
	// NoParams leaves sprop-parameter-sets out of the SDP (they stay in
	// band).
	NoParams bool
	// PayloadMax is the largest RTP payload (default 1400).
	PayloadMax int
}

// FileServer is an RTSP server (gortsplib's) that plays access units in a
// loop, paced like a live camera, to every client of rtsp://ADDR/cam. It
// records what RTCP its clients send.
type FileServer struct {
	URL  string
	opts FileOptions

	srv    *gortsplib.Server
	stream *gortsplib.ServerStream
	media  *description.Media

	stalled  atomic.Bool
	sent     atomic.Uint64 // access units sent
	lastSSRC atomic.Uint32
	mu       sync.Mutex
	rtcp     []rtcp.Packet
	stop     chan struct{}
	done     chan struct{}
	closed   sync.Once
}

// ReadAccessUnits is h26xtest.ReadAccessUnits, for the benchmarks that
// loop a file.
func ReadAccessUnits(path string, c h26x.Codec) ([][]byte, error) {
	return h26xtest.ReadAccessUnits(path, c)
}

// Packetize makes the RTP packets of one access unit as gortsplib's
// packetizers do (payloads of at most maxPayload bytes), timestamps unset.
func Packetize(c h26x.Codec, au []byte, maxPayload int) []*rtp.Packet {
	var pkts []*rtp.Packet
	var err error
	if c == h26x.H265 {
		e := &rtph265.Encoder{PayloadType: 96, PayloadMaxSize: maxPayload}
		if err = e.Init(); err == nil {
			pkts, err = e.Encode(nals(au))
		}
	} else {
		e := &rtph264.Encoder{PayloadType: 96, PacketizationMode: 1, PayloadMaxSize: maxPayload}
		if err = e.Init(); err == nil {
			pkts, err = e.Encode(nals(au))
		}
	}
	if err != nil {
		return nil
	}
	return pkts
}

// nals splits an Annex-B access unit into its NAL units.
func nals(au []byte) [][]byte {
	var out [][]byte
	h26x.SplitAnnexB(au, func(n []byte) bool { out = append(out, n); return true })
	return out
}

// freeUDPPair finds an even UDP port whose successor is free too (RTP and
// RTCP).
func freeUDPPair() (int, error) {
	for range 50 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := c.LocalAddr().(*net.UDPAddr).Port
		c.Close()
		if p%2 == 1 || p > 65000 {
			continue
		}
		a, err1 := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		b, err2 := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p+1))
		if a != nil {
			a.Close()
		}
		if b != nil {
			b.Close()
		}
		if err1 == nil && err2 == nil {
			return p, nil
		}
	}
	return 0, errors.New("no free UDP port pair")
}

// StartFileServer starts a FileServer.
func StartFileServer(o FileOptions) (*FileServer, error) {
	if len(o.AUs) == 0 {
		return nil, errors.New("rtsptest: no access units to serve")
	}
	if o.FPS <= 0 {
		o.FPS = 30
	}
	if o.PayloadMax <= 0 {
		o.PayloadMax = 1400
	}
	if o.Address == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		o.Address = l.Addr().String()
		l.Close()
	}
	fs := &FileServer{opts: o, URL: "rtsp://" + o.Address + "/cam", stop: make(chan struct{}), done: make(chan struct{})}
	// gortsplib's own sender reports extrapolate the RTP clock from the last
	// packet's sending, which says a picture was captured when it was sent;
	// play sends reports as a camera does instead (RFC 3550 6.4.1: the RTP
	// time of the report's own sending).
	fs.srv = &gortsplib.Server{Handler: fs, RTSPAddress: o.Address, DisableRTCPSenderReports: true}
	if o.UDP {
		p, err := freeUDPPair()
		if err != nil {
			return nil, err
		}
		fs.srv.UDPRTPAddress, fs.srv.UDPRTCPAddress = fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.1:%d", p+1)
	}
	if err := fs.srv.Start(); err != nil {
		return nil, err
	}
	var forma format.Format
	var vps, sps, pps []byte
	for _, n := range nals(o.AUs[0]) {
		switch t := o.Codec.NALType(n); {
		case o.Codec == h26x.H264 && t == 7, o.Codec == h26x.H265 && t == 33:
			sps = n
		case o.Codec == h26x.H264 && t == 8, o.Codec == h26x.H265 && t == 34:
			pps = n
		case o.Codec == h26x.H265 && t == 32:
			vps = n
		}
	}
	if o.NoParams {
		vps, sps, pps = nil, nil, nil
	}
	var encode func([][]byte) ([]*rtp.Packet, error)
	if o.Codec == h26x.H265 {
		forma = &format.H265{PayloadTyp: 96, VPS: vps, SPS: sps, PPS: pps}
		e := &rtph265.Encoder{PayloadType: 96, PayloadMaxSize: o.PayloadMax}
		if err := e.Init(); err != nil {
			fs.srv.Close()
			return nil, err
		}
		encode = e.Encode
	} else {
		forma = &format.H264{PayloadTyp: 96, PacketizationMode: 1, SPS: sps, PPS: pps}
		e := &rtph264.Encoder{PayloadType: 96, PacketizationMode: 1, PayloadMaxSize: o.PayloadMax}
		if err := e.Init(); err != nil {
			fs.srv.Close()
			return nil, err
		}
		encode = e.Encode
	}
	fs.media = &description.Media{Type: description.MediaTypeVideo, Formats: []format.Format{forma}}
	fs.stream = &gortsplib.ServerStream{Server: fs.srv, Desc: &description.Session{Medias: []*description.Media{fs.media}}}
	if err := fs.stream.Initialize(); err != nil {
		fs.srv.Close()
		return nil, err
	}
	go fs.play(encode)
	return fs, nil
}

// latency is how long before it is sent each picture was "captured": a
// camera's sampling-to-network delay.
const latency = 20 * time.Millisecond

// play sends the access units in a loop, one every 1/FPS, as a camera:
// each picture's RTP timestamp (90 kHz) is when it was captured, latency
// before it is sent, and a sender report once a second (twice while
// stalled, as GStreamer goes on sending them) maps that clock to the time
// of the report's sending.
func (fs *FileServer) play(encode func([][]byte) ([]*rtp.Packet, error)) {
	defer close(fs.done)
	period := time.Duration(float64(time.Second) / fs.opts.FPS)
	t := time.NewTicker(period)
	defer t.Stop()
	t0 := time.Now()
	base := uint32(t0.UnixNano())
	rtpAt := func(w time.Time) uint32 { return base + uint32(w.Sub(t0)*90000/time.Second) }
	var lastSR time.Time
	tick := int64(-1)
	for i := 0; ; {
		select {
		case <-fs.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		every := time.Second
		if fs.stalled.Load() {
			every = 500 * time.Millisecond
		}
		if !fs.opts.NoSenderReports && fs.ssrc() != 0 && now.Sub(lastSR) >= every {
			lastSR = now
			fs.stream.WritePacketRTCP(fs.media, &rtcp.SenderReport{SSRC: fs.ssrc(), NTPTime: ntp(now), RTPTime: rtpAt(now)}) //nolint:errcheck
		}
		if fs.stalled.Load() {
			continue
		}
		au := fs.opts.AUs[i%len(fs.opts.AUs)]
		i++
		pkts, err := encode(nals(au))
		if err != nil {
			continue
		}
		// Captured on the frame clock (timestamps a whole frame apart, as
		// a camera's, even when this goroutine runs late), latency ago.
		tick = max(tick+1, int64(now.Sub(t0)/period))
		captured := t0.Add(time.Duration(tick) * period).Add(-latency)
		for _, p := range pkts {
			p.Timestamp = rtpAt(captured)
			fs.lastSSRC.Store(p.SSRC)
			fs.stream.WritePacketRTPWithNTP(fs.media, p, captured) //nolint:errcheck // no reader is not an error
		}
		fs.sent.Add(1)
	}
}

func (fs *FileServer) ssrc() uint32 { return fs.lastSSRC.Load() }

// ntp is t as a 64-bit NTP timestamp.
func ntp(t time.Time) uint64 {
	const epoch = 2208988800 // 1900 to 1970
	s := uint64(t.Unix()) + epoch
	f := uint64(t.Nanosecond()) << 32 / 1_000_000_000
	return s<<32 | f
}

// Stall stops (true) or resumes (false) sending video; the sessions stay
// open and sender reports go on (twice a second), as with a camera whose
// encoder hung: an RTSP client's own timeout sees traffic.
func (fs *FileServer) Stall(on bool) { fs.stalled.Store(on) }

// Sent is how many access units it sent.
func (fs *FileServer) Sent() uint64 { return fs.sent.Load() }

// RTCP returns the RTCP packets its clients sent so far.
func (fs *FileServer) RTCP() []rtcp.Packet {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]rtcp.Packet(nil), fs.rtcp...)
}

// Close stops it; it is idempotent.
func (fs *FileServer) Close() {
	fs.closed.Do(func() {
		close(fs.stop)
		<-fs.done
		fs.stream.Close()
		fs.srv.Close()
	})
}

func (fs *FileServer) auth(c *gortsplib.ServerConn, req *base.Request) bool {
	return fs.opts.User == "" || c.VerifyCredentials(req, fs.opts.User, fs.opts.Password)
}

// OnDescribe implements gortsplib.ServerHandlerOnDescribe.
func (fs *FileServer) OnDescribe(ctx *gortsplib.ServerHandlerOnDescribeCtx) (*base.Response, *gortsplib.ServerStream, error) {
	if !fs.auth(ctx.Conn, ctx.Request) {
		return &base.Response{StatusCode: base.StatusUnauthorized}, nil, liberrors.ErrServerAuth{}
	}
	if ctx.Path != "/cam" {
		return &base.Response{StatusCode: base.StatusNotFound}, nil, nil
	}
	return &base.Response{StatusCode: base.StatusOK}, fs.stream, nil
}

// OnSetup implements gortsplib.ServerHandlerOnSetup.
func (fs *FileServer) OnSetup(ctx *gortsplib.ServerHandlerOnSetupCtx) (*base.Response, *gortsplib.ServerStream, error) {
	if !fs.auth(ctx.Conn, ctx.Request) {
		return &base.Response{StatusCode: base.StatusUnauthorized}, nil, liberrors.ErrServerAuth{}
	}
	return &base.Response{StatusCode: base.StatusOK}, fs.stream, nil
}

// OnPlay implements gortsplib.ServerHandlerOnPlay.
func (fs *FileServer) OnPlay(ctx *gortsplib.ServerHandlerOnPlayCtx) (*base.Response, error) {
	ctx.Session.OnPacketRTCPAny(func(_ *description.Media, p rtcp.Packet) {
		fs.mu.Lock()
		fs.rtcp = append(fs.rtcp, p)
		fs.mu.Unlock()
	})
	return &base.Response{StatusCode: base.StatusOK}, nil
}
