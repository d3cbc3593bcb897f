package rtsp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/internal/lifetime"
)

// metaRing is how many access units sent to the decoder are remembered
// (capture times by id): more than any decoder holds back.
const metaRing = 64

// auMeta is what a picture needs of its access unit.
type auMeta struct {
	id      uint64
	capture int64
	clock   sensors.CaptureClock
}

// Stats counts what a source did since New. It is a snapshot.
type Stats struct {
	Sessions        uint64 // sessions started (PLAY answered, a decoder open)
	Fallbacks       uint64 // auto transport fell back from UDP to TCP
	Depacketizer    h26x.Stats
	DecodeErrors    uint64 // access units or pictures the decoder failed on
	DecoderDropped  uint64 // pictures dropped after a decoder error until the next key
	Frames          uint64 // frames delivered
	Corrupt         uint64 // delivered with sensors.FlagError (the decoder flagged them)
	SenderReports   uint64 // RTCP sender reports received
	ReceiverReports uint64 // RTCP receiver reports sent by this package (TCP)
	RTPErrors       uint64 // packets gortsplib could not read
	// ClockSenderReport and ClockArrival count delivered frames by the
	// clock of their capture time.
	ClockSenderReport, ClockArrival uint64
	Transport                       string // of the current or last session
}

type stats struct {
	sessions, fallbacks, decodeErrors, decoderDropped, frames, corrupt atomic.Uint64
	senderReports, receiverReports, rtpErrors, clockSR, clockArrival   atomic.Uint64
	transport                                                          atomic.Value // string
}

// Source is a network camera. It implements sensors.Source and
// sensors.Pacer.
type Source struct {
	opts   Options
	u      *url.URL
	prefix string // "rtsp \"cam\" rtsp://host/path" for messages

	run      lifetime.Lifetime // Stop (Close) wakes Start and Next
	dp       *h26x.Depacketizer
	aus      chan *h26x.AccessUnit // delivered by dp, taken by Next
	wake     chan struct{}         // a drop was counted
	pending  [len(h26x.Stats{}.Dropped)]atomic.Uint32
	skipErrs [len(h26x.Stats{}.Dropped) + 1]error // by reason; the last: decoder
	fellBack atomic.Bool                          // auto fell back to TCP once: stay there
	pacing   atomic.Bool
	need     atomic.Int64 // bytes a slot must hold for the latest format
	cur      atomic.Pointer[session]
	stats    stats

	mu         sync.Mutex // Start, Next and the end of Close
	begun      bool       // run has begun (and not ended)
	started    bool
	pool       sensors.SlotPool
	sess       *session
	dec        Decoder
	held       *h26x.AccessUnit // the first key access unit, taken by Start
	timer      *time.Timer
	seq        uint64
	nextID     uint64
	meta       [metaRing]auMeta
	needKey    bool   // the decoder failed: send nothing until a key
	dropBefore uint64 // pictures of ids below this are dropped
	lastSPS    []byte
	sps        h26x.SPS

	fmu    sync.Mutex // format and desc, read from any goroutine
	format sensors.Format
	desc   string
}

// New checks the options; Start connects.
func New(o Options) (*Source, error) {
	u, err := o.parse()
	if err != nil {
		return nil, err
	}
	s := &Source{opts: o, u: u, prefix: fmt.Sprintf("rtsp %q %s", o.Name, Redact(o.URL)),
		aus: make(chan *h26x.AccessUnit, o.Buffers), wake: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	s.timer.Stop()
	s.dp = h26x.NewDepacketizer(h26x.H264, o.Buffers, s.delivered, s.dropped)
	for _, r := range h26x.DropReasons() {
		s.skipErrs[r-1] = fmt.Errorf("%s: %w: dropped (%s) until the next key picture", s.prefix, sensors.ErrSkipped, dropWhy(r))
	}
	s.skipErrs[len(s.skipErrs)-1] = fmt.Errorf("%s: %w: the decoder failed on an earlier picture; dropped until the next key picture", s.prefix, sensors.ErrSkipped)
	s.stats.transport.Store("")
	return s, nil
}

func dropWhy(r h26x.DropReason) string {
	switch r {
	case h26x.DropLoss:
		return "RTP packets were lost"
	case h26x.DropBroken:
		return "a packet could not be read"
	case h26x.DropUnsupported:
		return "the camera uses a packetization edged does not read"
	case h26x.DropTooBig:
		return "an access unit over 8 MiB"
	case h26x.DropOverrun:
		return "the decoder fell behind the network"
	case h26x.DropWaitKey:
		return "it refers to a picture that was dropped"
	case h26x.DropLeading:
		return "a leading picture of a key it cannot refer to"
	}
	return r.String()
}

// delivered and dropped run on gortsplib's reading goroutine (from Push).
func (s *Source) delivered(au *h26x.AccessUnit) { s.aus <- au } // never blocks: at most Buffers exist

func (s *Source) dropped(r h26x.DropReason) {
	s.pending[r-1].Add(1)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Name implements sensors.Source.
func (s *Source) Name() string { return s.opts.Name }

// Format implements sensors.Source: the format of the latest picture (or
// the stream's SPS before one); valid after Start.
func (s *Source) Format() sensors.Format {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.format
}

// SlotSize is what a slot must hold for the stream's frames (0 before a
// Start or Probe learnt the size).
func (s *Source) SlotSize() int { return int(s.need.Load()) }

// Pacing implements sensors.Pacer: Start is connecting, or Next waits
// for the camera's next packet (both end within Options.Timeout without
// one); a wait for a slot is not pacing.
func (s *Source) Pacing() bool { return s.pacing.Load() }

// Describe names the stream, the transport and the decoder ("" before a
// Start or Probe).
func (s *Source) Describe() string {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.desc
}

// Stats returns the counters.
func (s *Source) Stats() Stats {
	st := &s.stats
	return Stats{Sessions: st.sessions.Load(), Fallbacks: st.fallbacks.Load(), Depacketizer: s.dp.Stats(),
		DecodeErrors: st.decodeErrors.Load(), DecoderDropped: st.decoderDropped.Load(), Frames: st.frames.Load(),
		Corrupt: st.corrupt.Load(), SenderReports: st.senderReports.Load(), ReceiverReports: st.receiverReports.Load(),
		RTPErrors: st.rtpErrors.Load(), ClockSenderReport: st.clockSR.Load(), ClockArrival: st.clockArrival.Load(),
		Transport: st.transport.Load().(string)}
}

// setFormat notes a picture size (or the stream's, from its SPS) and what
// a slot must hold for it.
func (s *Source) setFormat(f sensors.Format) {
	s.fmu.Lock()
	s.format = f
	s.fmu.Unlock()
	s.need.Store(int64(f.FrameSize()))
}

// formatOf is the frame format of an SPS (as the decoder writes it).
func formatOf(sps h26x.SPS) sensors.Format {
	f := sensors.Format{Width: sps.Width, Height: sps.Height, Pixel: sensors.NV12, FPS: sps.FPS}
	if f.Width%2 == 1 {
		f.Stride = f.Width + 1
	}
	return f
}

// checkSPS refuses what edged does not decode.
func (s *Source) checkSPS(sps h26x.SPS) error {
	switch {
	case sps.ChromaFormat != 1:
		return fmt.Errorf("%s: %w: %s: chroma format %d (edged decodes 4:2:0 only)", s.prefix, sensors.ErrFormat, sps, sps.ChromaFormat)
	case sps.BitDepth != 8 || sps.BitDepthChroma != 8:
		return fmt.Errorf("%s: %w: %s: %d-bit samples (edged decodes 8-bit only)", s.prefix, sensors.ErrFormat, sps, sps.BitDepth)
	case sps.Interlaced:
		return fmt.Errorf("%s: %w: %s: interlaced (fields)", s.prefix, sensors.ErrFormat, sps)
	}
	return nil
}

// Start implements sensors.Source: it connects (DESCRIBE, SETUP, PLAY),
// learns the picture size from the SDP or, without parameter sets there,
// from the first key picture, and opens a decoder. Errors wrap
// sensors.ErrDeviceGone (unreachable, timed out, closed), sensors.ErrNotFound
// (no such path), ErrUnauthorized, sensors.ErrFormat (nothing edged
// decodes) or sensors.ErrGeometry (the pool's slots are too small).
func (s *Source) Start(ctx context.Context, pool sensors.SlotPool) error {
	if pool == nil {
		return fmt.Errorf("%s: Start without a slot pool", s.prefix)
	}
	if s.opts.Decoder == nil {
		return fmt.Errorf("%s: Start without a decoder", s.prefix)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("%s: already started", s.prefix)
	}
	s.run.Begin()
	s.begun = true
	s.pacing.Store(true)
	defer s.pacing.Store(false)
	err := s.begin(s.run.Context(ctx), pool)
	if err != nil {
		closed := s.run.Stopped()
		s.teardown()
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if closed {
			return fmt.Errorf("%s: %w", s.prefix, sensors.ErrClosed)
		}
		return err
	}
	s.started = true
	s.stats.sessions.Add(1)
	return nil
}

// begin is Start's work; on error, teardown undoes what it did.
func (s *Source) begin(ctx context.Context, pool sensors.SlotPool) error {
	s.pool, s.needKey, s.dropBefore, s.lastSPS = pool, false, 0, s.lastSPS[:0]
	for i := range s.pending {
		s.pending[i].Store(0)
	}
	sess, err := s.connect(ctx)
	if err != nil {
		return err
	}
	s.sess = sess
	s.cur.Store(sess)
	sps, err := s.geometry(ctx, sess)
	if err != nil {
		return err
	}
	if err := s.checkSPS(sps); err != nil {
		return err
	}
	s.sps = sps
	f := formatOf(sps)
	s.setFormat(f)
	if err := s.fits(f); err != nil {
		return err
	}
	dec, err := s.opts.Decoder(sess.track.codec, sess.track.params.AnnexB)
	if err != nil {
		return fmt.Errorf("%s: opening the %s decoder: %w", s.prefix, sess.track.codec, err)
	}
	s.dec = dec
	tr := sess.transport()
	s.stats.transport.Store(tr)
	desc := fmt.Sprintf("%s: %s over %s, decoded by %s", Redact(s.opts.URL), sps, tr, dec.Describe())
	if sess.track.note != "" {
		desc += "; " + sess.track.note
	}
	s.fmu.Lock()
	s.desc = desc
	s.fmu.Unlock()
	return nil
}

// geometry is the stream's SPS: the SDP's, or else the first key
// picture's, waited for while video arrives (the key is kept for Next).
func (s *Source) geometry(ctx context.Context, sess *session) (h26x.SPS, error) {
	if sess.track.params.AnnexB != nil {
		return sess.track.params.SPS, nil
	}
	for {
		select {
		case au := <-s.aus:
			if au.SPS == nil {
				s.dp.Recycle(au) // a key without its SPS: wait for one that has it
				continue
			}
			sps, err := h26x.ParseSPS(sess.track.codec, au.SPS)
			if err != nil {
				s.dp.Recycle(au)
				return sps, fmt.Errorf("%s: %w: the stream's SPS: %w", s.prefix, sensors.ErrFormat, err)
			}
			s.lastSPS = append(s.lastSPS[:0], au.SPS...)
			s.held = au
			return sps, nil
		case <-sess.done:
			return h26x.SPS{}, sess.down()
		case <-ctx.Done():
			return h26x.SPS{}, ctx.Err()
		case <-time.After(s.opts.Timeout / 4):
			if idle := time.Duration(sensors.Now() - sess.lastVideo.Load()); idle > s.opts.Timeout {
				return h26x.SPS{}, fmt.Errorf("%s: %w: %w for %v after PLAY", s.prefix, sensors.ErrDeviceGone, ErrStalled, idle.Round(time.Millisecond))
			}
		}
	}
}

// fits checks, when the pool can lend a slot at once, that its slots hold
// frames of f.
func (s *Source) fits(f sensors.Format) error {
	tg, ok := s.pool.(interface{ TryGet() (sensors.Slot, bool) })
	if !ok {
		return nil
	}
	slot, ok := tg.TryGet()
	if !ok {
		return nil
	}
	n := slotBytes(slot)
	slot.Release()
	if need := f.FrameSize(); n < need {
		return fmt.Errorf("%s: %w: %s frames need %d bytes, the slots hold %d", s.prefix, sensors.ErrGeometry, f, need, n)
	}
	return nil
}

// Close implements sensors.Source: it ends the session, frees the decoder
// and everything the session left, and wakes a waiting Start or Next. It
// is idempotent.
func (s *Source) Close() error {
	s.run.Stop()
	if sess := s.cur.Load(); sess != nil {
		sess.c.Close() // ends a request or a read in flight
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teardown()
	s.started = false
	return nil
}

// teardown ends what a run holds; it needs mu.
func (s *Source) teardown() {
	if s.begun {
		s.run.Stop()
	}
	if s.sess != nil {
		s.sess.close()
		s.sess = nil
		s.cur.Store(nil)
	}
	if s.dec != nil {
		s.dec.Close()
		s.dec = nil
	}
	if s.held != nil {
		s.dp.Recycle(s.held)
		s.held = nil
	}
	for {
		select {
		case au := <-s.aus:
			s.dp.Recycle(au)
			continue
		default:
		}
		break
	}
	select {
	case <-s.wake:
	default:
	}
	s.timer.Stop()
	s.pacing.Store(false)
	if s.begun {
		s.run.End()
		s.begun = false
	}
}

// Next implements sensors.Source. Pictures are delivered in the
// decoder's output order; each picture dropped (after a loss, until the
// next key) is one error wrapping sensors.ErrSkipped. The session's end
// is an error wrapping sensors.ErrDeviceGone: close the source and start
// it again.
func (s *Source) Next(ctx context.Context) (sensors.Frame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.run.Stopped() {
		return sensors.Frame{}, fmt.Errorf("%s: %w", s.prefix, sensors.ErrClosed)
	}
	live := s.run.Context(ctx)
	if s.held != nil {
		au := s.held
		s.held = nil
		if err := s.send(au); err != nil {
			return sensors.Frame{}, err
		}
	}
	for {
		f, ok, err := s.picture(ctx, live)
		if ok || err != nil {
			return f, err
		}
		for i := range s.pending {
			if n := s.pending[i].Load(); n > 0 && s.pending[i].CompareAndSwap(n, n-1) {
				return sensors.Frame{}, s.skipErrs[i]
			}
		}
		if err := s.wait(ctx, live); err != nil {
			return sensors.Frame{}, err
		}
	}
}

// wait waits for the next access unit (and sends it to the decoder), a
// drop to report, or the session's end.
func (s *Source) wait(ctx, live context.Context) error {
	s.timer.Reset(s.opts.Timeout / 4)
	s.pacing.Store(true)
	defer s.pacing.Store(false)
	defer s.timer.Stop()
	for {
		select {
		case au := <-s.aus:
			return s.send(au)
		case <-s.wake:
			return nil
		case <-s.sess.done:
			return s.sess.down()
		case <-live.Done():
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%s: %w", s.prefix, sensors.ErrClosed)
		case <-s.timer.C:
			if idle := time.Duration(sensors.Now() - s.sess.lastVideo.Load()); idle > s.opts.Timeout {
				return fmt.Errorf("%s: %w: %w for %v: the camera keeps its session open but sends no video", s.prefix, sensors.ErrDeviceGone, ErrStalled, idle.Round(time.Millisecond))
			}
			s.timer.Reset(s.opts.Timeout / 4)
		}
	}
}

// send hands one access unit to the decoder (or drops it while the
// decoder waits for a key) and recycles it.
func (s *Source) send(au *h26x.AccessUnit) error {
	defer s.dp.Recycle(au)
	codec := s.sess.track.codec
	if au.Key && au.SPS != nil && !bytes.Equal(au.SPS, s.lastSPS) {
		sps, err := h26x.ParseSPS(codec, au.SPS)
		if err != nil {
			return fmt.Errorf("%s: %w: a new SPS: %w", s.prefix, sensors.ErrFormat, err)
		}
		if err := s.checkSPS(sps); err != nil {
			return err
		}
		s.lastSPS = append(s.lastSPS[:0], au.SPS...)
		s.sps = sps
	}
	if s.needKey {
		if !au.Key {
			s.stats.decoderDropped.Add(1)
			return s.skipErrs[len(s.skipErrs)-1]
		}
		s.needKey, s.dropBefore = false, s.nextID
	}
	id := s.nextID
	s.nextID++
	t, clk := s.sess.clk.capture(au.Timestamp, au.Arrival)
	s.meta[id%metaRing] = auMeta{id: id, capture: t, clock: clk}
	if err := s.dec.Send(au.Data, id); err != nil {
		s.stats.decodeErrors.Add(1)
		s.needKey = true
		if errors.Is(err, sensors.ErrFormat) {
			return fmt.Errorf("%s: %w", s.prefix, err)
		}
		return s.skipErrs[len(s.skipErrs)-1]
	}
	return nil
}

// picture delivers the decoder's next picture in a slot, if it has one.
func (s *Source) picture(ctx, live context.Context) (sensors.Frame, bool, error) {
	id, f, ok, err := s.dec.Receive()
	if err != nil {
		s.stats.decodeErrors.Add(1)
		if errors.Is(err, sensors.ErrFormat) {
			return sensors.Frame{}, false, fmt.Errorf("%s: %w", s.prefix, err)
		}
		s.needKey = true
		return sensors.Frame{}, false, s.skipErrs[len(s.skipErrs)-1]
	}
	if !ok {
		return sensors.Frame{}, false, nil
	}
	if id < s.dropBefore {
		s.stats.decoderDropped.Add(1)
		return sensors.Frame{}, false, s.skipErrs[len(s.skipErrs)-1]
	}
	m := s.meta[id%metaRing]
	if m.id != id {
		m = auMeta{id: id, capture: sensors.Now(), clock: sensors.ClockArrival}
	}
	if f.Width == s.sps.Width && f.Height == s.sps.Height {
		f.FPS = s.sps.FPS
	}
	if f != s.Format() {
		s.setFormat(f)
	}
	slot, err := s.pool.Get(live)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return sensors.Frame{}, false, cerr
		}
		if s.run.Stopped() {
			return sensors.Frame{}, false, fmt.Errorf("%s: %w", s.prefix, sensors.ErrClosed)
		}
		return sensors.Frame{}, false, fmt.Errorf("%s: a slot: %w", s.prefix, err)
	}
	need := f.FrameSize()
	if n := slotBytes(slot); n < need {
		slot.Release()
		return sensors.Frame{}, false, fmt.Errorf("%s: %w: the camera now sends %s frames of %d bytes, the slots hold %d", s.prefix, sensors.ErrGeometry, f, need, n)
	}
	corrupt, err := s.write(slot)
	if err != nil {
		slot.Release()
		s.stats.decodeErrors.Add(1)
		return sensors.Frame{}, false, fmt.Errorf("%s: %w", s.prefix, err)
	}
	fr := sensors.Frame{Seq: s.seq, TCapture: m.capture, TReady: sensors.Now(), BytesUsed: need,
		Flags: sensors.FlagCopied, Format: f, Slot: slot, Clock: m.clock}
	if corrupt {
		fr.Flags |= sensors.FlagError
		s.stats.corrupt.Add(1)
	}
	s.seq++
	s.stats.frames.Add(1)
	if m.clock == sensors.ClockSenderReport {
		s.stats.clockSR.Add(1)
	} else {
		s.stats.clockArrival.Add(1)
	}
	return fr, true, nil
}

// slotBytes is what a slot holds: its device memory's size, or its host
// bytes.
func slotBytes(slot sensors.Slot) int {
	if ds, ok := slot.(deviceSlot); ok && ds.Device() != 0 {
		return ds.Size()
	}
	return len(slot.Bytes())
}

// write has the decoder write its picture into slot: device to device
// when both can, else into the slot's host bytes.
func (s *Source) write(slot sensors.Slot) (bool, error) {
	if dw, ok := s.dec.(DeviceWriter); ok {
		if ds, ok := slot.(deviceSlot); ok && ds.Device() != 0 {
			return dw.WriteDevice(ds.Device(), ds.Size())
		}
	}
	return s.dec.Write(slot.Bytes())
}

// Info is what Probe learnt of a stream.
type Info struct {
	Codec     h26x.Codec
	SPS       h26x.SPS       // the stream's (the SDP's, or its first key picture's)
	Format    sensors.Format // the frames a decoder writes for it
	Transport string         // what the session used ("tcp", "udp")
	// InBand: the SDP had no usable parameter sets (Note says why); the
	// stream carries them itself.
	InBand bool
	Note   string
}

func (i Info) String() string {
	s := fmt.Sprintf("%s over %s", i.SPS, i.Transport)
	if i.Note != "" {
		s += "; " + i.Note
	}
	return s
}

// Probe connects as Start does (DESCRIBE, SETUP, PLAY), learns the codec
// and size (from the SDP, else from the first key picture, waited for
// within the timeout while video arrives), checks that edged decodes it,
// and disconnects; it opens no decoder. Errors are Start's. edged check
// uses it; a started source refuses it. SlotSize is known afterwards.
func (s *Source) Probe(ctx context.Context) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return Info{}, fmt.Errorf("%s: Probe of a started source", s.prefix)
	}
	s.run.Begin()
	s.begun = true
	defer s.teardown()
	live := s.run.Context(ctx)
	sess, err := s.connect(live)
	if err != nil {
		return Info{}, err
	}
	s.sess = sess
	s.cur.Store(sess)
	ctx, cancel := context.WithTimeout(live, 2*s.opts.Timeout)
	defer cancel()
	sps, err := s.geometry(ctx, sess)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && live.Err() == nil {
			err = fmt.Errorf("%s: %w: video arrives, but no key picture with its SPS within %v", s.prefix, sensors.ErrFormat, 2*s.opts.Timeout)
		}
		return Info{}, err
	}
	if err := s.checkSPS(sps); err != nil {
		return Info{}, err
	}
	f := formatOf(sps)
	s.setFormat(f)
	return Info{Codec: sess.track.codec, SPS: sps, Format: f, Transport: sess.transport(),
		InBand: sess.track.params.AnnexB == nil, Note: sess.track.note}, nil
}
