package h26x

import (
	"bytes"
	"sync/atomic"
)

// MaxAccessUnit bounds an access unit's size (8 MiB, as gortsplib's
// depacketizers): a larger one is dropped (DropTooBig), so a hostile or
// broken stream cannot grow the buffers without limit.
const MaxAccessUnit = 8 << 20

// Padding is how many zero bytes follow AccessUnit.Data in its buffer:
// libavcodec's bitstream reader may read that far past the end
// (AV_INPUT_BUFFER_PADDING_SIZE).
const Padding = 64

// DropReason says why an access unit was not delivered.
type DropReason uint8

// The reasons, in Stats.Dropped order.
const (
	// DropLoss: an RTP sequence gap fell in or before it.
	DropLoss DropReason = iota + 1
	// DropBroken: a fragment without its start, or a payload that does not
	// parse.
	DropBroken
	// DropUnsupported: a packetization edged does not read (STAP-B, MTAP,
	// FU-B, PACI).
	DropUnsupported
	// DropTooBig: larger than MaxAccessUnit.
	DropTooBig
	// DropOverrun: no free buffer; the consumer fell behind.
	DropOverrun
	// DropWaitKey: complete, but it follows a dropped one and is no random
	// access point: its references are gone.
	DropWaitKey
	// DropLeading: an H.265 RASL picture after resuming at a CRA picture.
	DropLeading
	dropReasons
)

func (r DropReason) String() string {
	switch r {
	case DropLoss:
		return "loss"
	case DropBroken:
		return "broken"
	case DropUnsupported:
		return "unsupported"
	case DropTooBig:
		return "too_big"
	case DropOverrun:
		return "overrun"
	case DropWaitKey:
		return "wait_key"
	case DropLeading:
		return "leading"
	}
	return "delivered"
}

// DropReasons lists the reasons in order (for metrics labels).
func DropReasons() []DropReason {
	return []DropReason{DropLoss, DropBroken, DropUnsupported, DropTooBig, DropOverrun, DropWaitKey, DropLeading}
}

// AccessUnit is one picture's NAL units in Annex-B form. The Depacketizer
// owns its memory: whoever receives it passes it back with Recycle.
type AccessUnit struct {
	// Data is the NAL units, each behind a 4-byte start code. Padding zero
	// bytes follow it in its buffer.
	Data []byte
	// Timestamp is the RTP timestamp; Arrival when its first packet
	// arrived (the clock Push was given).
	Timestamp uint32
	Arrival   int64
	// Key: it is a random access point (H.264 IDR, H.265 IRAP).
	Key bool
	// SPS is the first sequence parameter set in Data (no start code), nil
	// when it has none.
	SPS []byte

	buf []byte
}

// Stats counts what a Depacketizer saw. It is a snapshot.
type Stats struct {
	Packets   uint64 // RTP packets pushed
	Lost      uint64 // packets missing by sequence number
	Late      uint64 // packets older than the last one (duplicates, late reorders), ignored
	Delivered uint64 // access units handed on
	// Dropped counts access units not delivered, by DropReason (index
	// reason-1).
	Dropped [dropReasons - 1]uint64
}

// DroppedTotal is the sum of Dropped.
func (s Stats) DroppedTotal() uint64 {
	var n uint64
	for _, d := range s.Dropped {
		n += d
	}
	return n
}

// Depacketizer assembles RTP payloads of one H.264 or H.265 stream into
// access units. An access unit ends with the RTP marker bit or when the
// timestamp changes (for cameras that do not set the marker); parameter
// sets sent ahead of a picture with their own timestamp join that
// picture's access unit. Push, Reset and the callbacks run on one
// goroutine; Recycle and Stats may be called from any.
type Depacketizer struct {
	codec   Codec
	deliver func(*AccessUnit)
	drop    func(DropReason)
	free    chan *AccessUnit
	all     []*AccessUnit

	cur      *AccessUnit // the buffer being filled; nil when overrun
	building bool        // an access unit has begun
	n        int         // bytes in cur.buf
	ts       uint32
	arrival  int64
	broken   DropReason // why the one being built is unusable; 0 if it is not
	inFU     bool
	firstVCL int // NAL type of its first slice; -1 before one
	spsOff   int // offset of its first SPS after the start code; -1 if none

	haveSeq     bool
	nextSeq     uint16
	waitKey     bool // drop until a random access point
	skipLeading bool // resumed at a CRA/BLA with leading pictures: drop RASL

	packets, lost, late, delivered atomic.Uint64
	dropped                        [dropReasons - 1]atomic.Uint64
}

// NewDepacketizer returns a depacketizer for codec c with n access unit
// buffers (at least 2). deliver receives each complete, usable access
// unit; drop is told of each one dropped. Both are called from Push and
// must not block; deliver's access unit comes back through Recycle. The
// first access unit delivered is a random access point.
func NewDepacketizer(c Codec, n int, deliver func(*AccessUnit), drop func(DropReason)) *Depacketizer {
	n = max(n, 2)
	d := &Depacketizer{codec: c, deliver: deliver, drop: drop, free: make(chan *AccessUnit, n)}
	for range n {
		au := &AccessUnit{}
		d.all = append(d.all, au)
		d.free <- au
	}
	d.Reset(c)
	return d
}

// Codec is the codec being depacketized.
func (d *Depacketizer) Codec() Codec { return d.codec }

// Reset starts over with codec c, as after joining a stream: nothing is
// delivered before the next random access point. An access unit being
// built is discarded (not counted). Access units delivered earlier must
// still be recycled.
func (d *Depacketizer) Reset(c Codec) {
	d.codec = c
	if d.cur != nil {
		d.free <- d.cur
		d.cur = nil
	}
	d.building, d.haveSeq, d.inFU = false, false, false
	d.waitKey, d.skipLeading = true, false
}

// Recycle gives back an access unit that deliver received.
func (d *Depacketizer) Recycle(au *AccessUnit) {
	if au == nil {
		return
	}
	au.Data, au.SPS = nil, nil
	select {
	case d.free <- au:
	default: // not one of ours, or given back twice: nothing to do
	}
}

// Free is how many buffers are free (neither being filled nor delivered
// and not yet recycled).
func (d *Depacketizer) Free() int { return len(d.free) }

// Stats returns the counters.
func (d *Depacketizer) Stats() Stats {
	s := Stats{Packets: d.packets.Load(), Lost: d.lost.Load(), Late: d.late.Load(), Delivered: d.delivered.Load()}
	for i := range s.Dropped {
		s.Dropped[i] = d.dropped[i].Load()
	}
	return s
}

// Push consumes one RTP packet: its payload, sequence number, timestamp
// and marker bit, and now, the time it arrived.
func (d *Depacketizer) Push(payload []byte, seq uint16, ts uint32, marker bool, now int64) {
	d.packets.Add(1)
	gap := false
	if d.haveSeq {
		switch diff := int16(seq - d.nextSeq); {
		case diff < 0:
			d.late.Add(1)
			return
		case diff > 0:
			d.lost.Add(uint64(diff))
			gap = true
		}
	}
	d.haveSeq, d.nextSeq = true, seq+1
	if gap {
		d.inFU = false
		d.waitKey = true
		if d.building {
			d.breakAU(DropLoss)
		}
	}
	if d.building && ts != d.ts {
		if d.firstVCL < 0 && d.broken == 0 {
			d.ts = ts // parameter sets ahead of their picture: they join it
		} else {
			d.finish()
		}
	}
	if !d.building {
		d.begin(ts, now)
	}
	if gap {
		// The missing packets may have been the head of this one.
		d.breakAU(DropLoss)
	}
	d.consume(payload)
	if marker && (d.firstVCL >= 0 || d.broken != 0) {
		d.finish()
	}
}

func (d *Depacketizer) begin(ts uint32, now int64) {
	d.building, d.ts, d.arrival = true, ts, now
	d.n, d.broken, d.inFU, d.firstVCL, d.spsOff = 0, 0, false, -1, -1
	if d.cur == nil {
		select {
		case d.cur = <-d.free:
		default:
			d.broken = DropOverrun
		}
	}
}

func (d *Depacketizer) breakAU(r DropReason) {
	if d.broken == 0 {
		d.broken = r
	}
}

// finish ends the access unit being built: delivered, or dropped with its
// reason.
func (d *Depacketizer) finish() {
	d.building = false
	reason := d.broken
	key := d.firstVCL >= 0 && d.codec.isRandomAccess(d.firstVCL)
	switch {
	case reason != 0:
	case d.firstVCL < 0:
		reason = DropBroken // only possible when cut short; see Push
	case d.waitKey && !key:
		reason = DropWaitKey
	case d.skipLeading && !key && (d.firstVCL == nal265RASLN || d.firstVCL == nal265RASLR):
		reason = DropLeading
	}
	if reason != 0 {
		if reason != DropWaitKey && reason != DropLeading {
			d.waitKey = true
		}
		d.dropped[reason-1].Add(1)
		d.drop(reason)
		return
	}
	if key {
		d.waitKey = false
		d.skipLeading = d.codec == H265 && (d.firstVCL == nal265CRA || d.firstVCL == nal265BLAWLP)
	} else if d.skipLeading && d.firstVCL != nal265RASLN && d.firstVCL != nal265RASLR && d.firstVCL != 6 && d.firstVCL != 7 {
		d.skipLeading = false // a trailing picture: no RASL can follow
	}
	au := d.cur
	d.cur = nil
	clear(au.buf[d.n : d.n+Padding])
	au.Data = au.buf[:d.n:d.n]
	au.Timestamp, au.Arrival, au.Key, au.SPS = d.ts, d.arrival, key, nil
	if d.spsOff >= 0 {
		au.SPS = nalAt(au.Data, d.spsOff)
	}
	d.delivered.Add(1)
	d.deliver(au)
}

// nalAt is the NAL unit starting at off in Annex-B data b.
func nalAt(b []byte, off int) []byte {
	rest := b[off:]
	if k := bytes.Index(rest, []byte{0, 0, 1}); k >= 0 {
		rest = rest[:k]
	}
	return bytes.TrimRight(rest, "\x00")
}

// grow makes room for need more bytes (and the padding) in cur.
func (d *Depacketizer) grow(need int) bool {
	if d.cur == nil || d.broken != 0 {
		return false
	}
	if d.n+need > MaxAccessUnit {
		d.broken = DropTooBig
		return false
	}
	if d.n+need+Padding > cap(d.cur.buf) {
		nb := make([]byte, max(2*cap(d.cur.buf), d.n+need+Padding, 64<<10))
		copy(nb, d.cur.buf[:d.n])
		d.cur.buf = nb
	}
	d.cur.buf = d.cur.buf[:cap(d.cur.buf)]
	return true
}

// startNAL appends a start code and the NAL unit's header hdr, then body,
// and notes its type.
func (d *Depacketizer) startNAL(hdr, body []byte, typ int) {
	if d.codec.isVCL(typ) && d.firstVCL < 0 {
		d.firstVCL = typ
	}
	if !d.grow(len(startCode) + len(hdr) + len(body)) {
		return
	}
	d.n += copy(d.cur.buf[d.n:], startCode[:])
	if d.codec.isSPS(typ) && d.spsOff < 0 {
		d.spsOff = d.n
	}
	d.n += copy(d.cur.buf[d.n:], hdr)
	d.n += copy(d.cur.buf[d.n:], body)
}

// appendRaw appends the rest of a fragmented NAL unit.
func (d *Depacketizer) appendRaw(body []byte) {
	if d.grow(len(body)) {
		d.n += copy(d.cur.buf[d.n:], body)
	}
}

func (d *Depacketizer) consume(p []byte) {
	if d.codec == H265 {
		d.consume265(p)
	} else {
		d.consume264(p)
	}
}

func (d *Depacketizer) consume264(p []byte) {
	if len(p) < 1 {
		d.breakAU(DropBroken)
		return
	}
	switch typ := int(p[0] & 0x1f); {
	case isAnnexB(p):
		d.inFU = false
		d.annexB(p)
	case typ >= 1 && typ <= 23:
		d.inFU = false
		d.startNAL(nil, p, typ)
	case typ == nal264STAPA:
		d.inFU = false
		d.aggregate(p[1:])
	case typ == nal264FUA:
		if len(p) < 2 {
			d.breakAU(DropBroken)
			return
		}
		hdr := [1]byte{p[0]&0xe0 | p[1]&0x1f}
		d.fragment(hdr[:], p[2:], int(p[1]&0x1f), p[1]&0x80 != 0, p[1]&0x40 != 0)
	case typ == nal264STAPB || typ == nal264MTAP1 || typ == nal264MTAP2 || typ == nal264FUB:
		d.inFU = false
		d.breakAU(DropUnsupported)
	default:
		d.inFU = false
		d.breakAU(DropBroken)
	}
}

func (d *Depacketizer) consume265(p []byte) {
	if len(p) < 2 {
		d.breakAU(DropBroken)
		return
	}
	switch typ := int(p[0]>>1) & 0x3f; {
	case isAnnexB(p):
		d.inFU = false
		d.annexB(p)
	case typ < nal265AP:
		d.inFU = false
		d.startNAL(nil, p, typ)
	case typ == nal265AP:
		d.inFU = false
		d.aggregate(p[2:])
	case typ == nal265FU:
		if len(p) < 3 {
			d.breakAU(DropBroken)
			return
		}
		ft := int(p[2] & 0x3f)
		hdr := [2]byte{p[0]&0x81 | byte(ft)<<1, p[1]}
		d.fragment(hdr[:], p[3:], ft, p[2]&0x80 != 0, p[2]&0x40 != 0)
	case typ == nal265PACI:
		d.inFU = false
		d.breakAU(DropUnsupported)
	default:
		d.inFU = false
		d.breakAU(DropBroken)
	}
}

// aggregate reads an aggregation packet's NAL units (STAP-A, H.265 AP
// without DONL): each behind a 16-bit size.
func (d *Depacketizer) aggregate(p []byte) {
	if len(p) == 0 {
		d.breakAU(DropBroken)
		return
	}
	for len(p) > 0 {
		if len(p) < 2 {
			d.breakAU(DropBroken)
			return
		}
		size := int(p[0])<<8 | int(p[1])
		p = p[2:]
		if size < d.codec.headerLen() || size > len(p) {
			d.breakAU(DropBroken)
			return
		}
		d.startNAL(nil, p[:size], d.codec.NALType(p[:size]))
		p = p[size:]
	}
}

// fragment handles one fragmentation unit (FU-A, H.265 FU) of a NAL unit
// of type typ whose header is hdr.
func (d *Depacketizer) fragment(hdr, body []byte, typ int, start, end bool) {
	switch {
	case start && end:
		d.breakAU(DropBroken) // RFC 6184 5.8: S and E must not both be set
		d.inFU = false
	case start:
		if d.inFU {
			d.breakAU(DropBroken) // the previous fragmented NAL unit lacks its end
		}
		d.inFU = true
		d.startNAL(hdr, body, typ)
	case !d.inFU:
		d.breakAU(DropBroken) // a fragment without its start
	default:
		d.appendRaw(body)
		d.inFU = !end
	}
}

// isAnnexB reports whether a payload carries Annex-B data (a start code)
// instead of a NAL unit, as some cameras send.
func isAnnexB(p []byte) bool {
	return len(p) >= 3 && p[0] == 0 && p[1] == 0 && (p[2] == 1 || (p[2] == 0 && len(p) >= 4 && p[3] == 1))
}

// annexB appends each NAL unit of an Annex-B payload.
func (d *Depacketizer) annexB(p []byte) {
	SplitAnnexB(p, func(nal []byte) bool {
		if len(nal) < d.codec.headerLen() {
			d.breakAU(DropBroken)
			return false
		}
		d.startNAL(nil, nal, d.codec.NALType(nal))
		return true
	})
}
