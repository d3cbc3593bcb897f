package rtsp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bluenviron/gortsplib/v5"
	"github.com/bluenviron/gortsplib/v5/pkg/base"
	"github.com/bluenviron/gortsplib/v5/pkg/description"
	"github.com/bluenviron/gortsplib/v5/pkg/format"
	"github.com/bluenviron/gortsplib/v5/pkg/liberrors"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// receiverReportPeriod is how often a session over TCP sends RTCP receiver
// reports (gortsplib sends them only over UDP), as gortsplib does.
const receiverReportPeriod = 5 * time.Second

// session is one RTSP connection: DESCRIBE, SETUP, PLAY, then RTP into the
// source's depacketizer until it ends.
type session struct {
	src       *Source
	c         *gortsplib.Client
	media     *description.Media
	track     track
	clk       clock
	lastVideo atomic.Int64  // CLOCK_MONOTONIC ns of the last video packet
	ssrc      atomic.Uint32 // the camera's
	lastSeq   atomic.Uint32 // its last sequence number
	localSSRC uint32

	done   chan struct{} // closed when the client ended; err says why
	err    error
	rrDone chan struct{}
}

// track is the video a session plays, as the SDP describes it.
type track struct {
	codec  h26x.Codec
	forma  format.Format
	params h26x.Params // AnnexB nil when the SDP has none usable
	note   string      // why the SDP's parameter sets are not used ("" when they are)
}

// pickTrack chooses the first H.264 or H.265 video of an SDP and checks
// its parameter sets.
func pickTrack(desc *description.Session) (*description.Media, track, error) {
	var found []string
	for _, m := range desc.Medias {
		for _, f := range m.Formats {
			found = append(found, fmt.Sprintf("%s %s", m.Type, f.Codec()))
			if m.Type != description.MediaTypeVideo {
				continue
			}
			switch f := f.(type) {
			case *format.H264:
				return m, withParams(track{codec: h26x.H264, forma: f}, f.SPS, f.PPS), nil
			case *format.H265:
				if f.MaxDONDiff != 0 {
					return nil, track{}, fmt.Errorf("%w: %w: H.265 with decoding order numbers (sprop-max-don-diff %d)", sensors.ErrFormat, ErrNoVideo, f.MaxDONDiff)
				}
				return m, withParams(track{codec: h26x.H265, forma: f}, f.VPS, f.SPS, f.PPS), nil
			}
		}
	}
	if len(found) == 0 {
		return nil, track{}, fmt.Errorf("%w: %w: the SDP describes no media", sensors.ErrFormat, ErrNoVideo)
	}
	return nil, track{}, fmt.Errorf("%w: %w (it has %v)", sensors.ErrFormat, ErrNoVideo, found)
}

// withParams checks the SDP's parameter sets (empty ones are absent).
func withParams(t track, sets ...[]byte) track {
	var nals [][]byte
	for _, s := range sets {
		if len(s) > 0 {
			nals = append(nals, s)
		}
	}
	if len(nals) == 0 {
		t.note = "no parameter sets in the SDP"
		return t
	}
	p, err := h26x.CheckParams(t.codec, nals)
	if err != nil {
		t.note = "the SDP's parameter sets are unusable (" + err.Error() + ")"
		return t
	}
	t.params = p
	return t
}

// errorf is the error of a session step: the RTSP library's error as
// scrubbed text, wrapped around the sentinel that says what it means.
func (s *Source) errorf(step string, err error) error {
	if err == nil {
		return nil
	}
	sentinel := classify(err)
	return fmt.Errorf("%s: %s: %w: %s", s.prefix, step, sentinel, scrub(err.Error(), s.opts.Password))
}

// classify names what an error of gortsplib (or the network) means to the
// capture loop.
func classify(err error) error {
	var bad liberrors.ErrClientBadStatusCode
	if errors.As(err, &bad) {
		switch bad.Code {
		case base.StatusUnauthorized, base.StatusForbidden:
			return ErrUnauthorized
		case base.StatusNotFound:
			return sensors.ErrNotFound
		}
	}
	return sensors.ErrDeviceGone
}

// connect runs DESCRIBE, SETUP and PLAY. From PLAY on, RTP goes into the
// source's depacketizer (reset for the track's codec first).
func (s *Source) connect(ctx context.Context) (*session, error) {
	o := s.opts
	sess := &session{src: s, done: make(chan struct{}), rrDone: make(chan struct{}), localSSRC: rand.Uint32()}
	c := &gortsplib.Client{
		Scheme: "rtsp", Host: s.u.Host,
		ReadTimeout: o.Timeout, WriteTimeout: o.Timeout,
		InitialUDPReadTimeout: min(3*time.Second, o.Timeout),
		UDPReadBufferSize:     o.UDPReadBuffer,
		UserAgent:             "edged",
		DialContext:           (&net.Dialer{Timeout: o.Timeout}).DialContext,
		// gortsplib logs with the standard log package by default; only
		// runtime/ may log, so these only count.
		OnTransportSwitch: func(error) { s.fellBack.Store(true); s.stats.fallbacks.Add(1) },
		OnPacketsLost:     func(uint64) {},
		OnDecodeError:     func(error) { s.stats.rtpErrors.Add(1) },
	}
	switch {
	case o.Transport == TransportTCP, o.Transport == TransportAuto && s.fellBack.Load():
		p := gortsplib.ProtocolTCP
		c.Protocol = &p
	case o.Transport == TransportUDP:
		p := gortsplib.ProtocolUDP
		c.Protocol = &p
	}
	sess.c = c
	if err := c.Start(); err != nil {
		return nil, s.errorf("starting the client", err)
	}
	// Cancelling ctx, or closing the source, closes the client, which ends
	// a request in flight.
	stop := context.AfterFunc(ctx, c.Close)
	fail := func(step string, err error) (*session, error) {
		stop()
		c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, s.errorf(step, err)
	}
	u := &base.URL{Scheme: "rtsp", Host: s.u.Host, Path: s.u.Path, RawPath: s.u.RawPath, RawQuery: s.u.RawQuery}
	if o.Username != "" {
		u.User = url.UserPassword(o.Username, o.Password)
	}
	desc, _, err := c.Describe(u)
	if err != nil {
		return fail("DESCRIBE", err)
	}
	media, tr, err := pickTrack(desc)
	if err != nil {
		stop()
		c.Close()
		return nil, fmt.Errorf("%s: %w", s.prefix, err)
	}
	sess.media, sess.track = media, tr
	sess.clk.rate = int64(tr.forma.ClockRate())
	s.dp.Reset(tr.codec)
	if _, err := c.Setup(desc.BaseURL, media, 0, 0); err != nil {
		return fail("SETUP", err)
	}
	c.OnPacketRTP(media, tr.forma, sess.onRTP)
	c.OnPacketRTCP(media, sess.onRTCP)
	sess.lastVideo.Store(sensors.Now())
	if _, err := c.Play(nil); err != nil {
		return fail("PLAY", err)
	}
	stop()
	// From here the source's Close (through its session) ends the client.
	go sess.wait()
	go sess.reports()
	return sess, nil
}

// onRTP runs on gortsplib's reading goroutine for every video packet.
func (sess *session) onRTP(p *rtp.Packet) {
	now := sensors.Now()
	sess.lastVideo.Store(now)
	sess.ssrc.Store(p.SSRC)
	sess.lastSeq.Store(uint32(p.SequenceNumber))
	sess.src.dp.Push(p.Payload, p.SequenceNumber, p.Timestamp, p.Marker, now)
}

// onRTCP takes the camera's sender reports.
func (sess *session) onRTCP(p rtcp.Packet) {
	if sr, ok := p.(*rtcp.SenderReport); ok {
		sess.clk.report(sr.RTPTime, sr.NTPTime, sensors.Now())
		sess.src.stats.senderReports.Add(1)
	}
}

// wait ends with the client.
func (sess *session) wait() {
	sess.err = sess.c.Wait()
	close(sess.done)
}

// down is the error of a session that ended by itself.
func (sess *session) down() error {
	err := sess.err
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
		detail := "the camera closed the connection"
		if err != nil && !errors.Is(err, io.EOF) {
			detail = err.Error()
		}
		return fmt.Errorf("%s: %w: %s", sess.src.prefix, sensors.ErrDeviceGone, scrub(detail, sess.src.opts.Password))
	}
	return sess.src.errorf("session", err)
}

// transport is the protocol in use ("tcp", "udp"; "" before PLAY).
func (sess *session) transport() string {
	t := sess.c.Transport()
	if t == nil || t.Session == nil {
		return ""
	}
	if t.Session.Protocol == gortsplib.ProtocolTCP {
		return TransportTCP
	}
	return TransportUDP
}

// reports sends RTCP receiver reports over TCP, where gortsplib sends
// none, until the session ends.
func (sess *session) reports() {
	defer close(sess.rrDone)
	t := time.NewTicker(receiverReportPeriod)
	defer t.Stop()
	for {
		select {
		case <-sess.done:
			return
		case <-t.C:
		}
		if sess.transport() != TransportTCP || sess.ssrc.Load() == 0 {
			continue
		}
		st := sess.src.dp.Stats()
		rr := rtcp.ReceptionReport{SSRC: sess.ssrc.Load(), LastSequenceNumber: sess.lastSeq.Load(), TotalLost: uint32(min(st.Lost, 0xffffff))}
		if ntp, at := sess.clk.last(); at != 0 {
			rr.LastSenderReport = uint32(ntp >> 16)
			rr.Delay = uint32(float64(sensors.Now()-at) / 1e9 * 65536)
		}
		if sess.c.WritePacketRTCP(sess.media, &rtcp.ReceiverReport{SSRC: sess.localSSRC, Reports: []rtcp.ReceptionReport{rr}}) == nil {
			sess.src.stats.receiverReports.Add(1)
		}
	}
}

// close ends the client and waits for the session's goroutines.
func (sess *session) close() {
	if sess.c != nil {
		sess.c.Close()
	}
	<-sess.done
	<-sess.rrDone
}
