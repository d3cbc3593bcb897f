package h26x

import (
	"os"
	"testing"

	"github.com/bluenviron/gortsplib/v5/pkg/format/rtph264"
	"github.com/bluenviron/gortsplib/v5/pkg/format/rtph265"
	"github.com/pion/rtp"
)

// streamFile is the committed sample of each codec: 2 s of testsrc2 at
// 170x100 (coded 176x112 / 176x104: both crop), a key every 15 frames,
// two slices a picture for H.264 (testdata/README.md says how they were
// made).
var streamFile = map[Codec]string{H264: "testdata/h264_170x100.h264", H265: "testdata/h265_170x100.h265"}

// readAUs splits a sample Annex-B file into access units, each NAL unit
// behind a 4-byte start code (what the depacketizer writes). A new access
// unit begins at a parameter set, SEI or AUD after a slice, or at a slice
// that is the first of its picture.
func readAUs(t testing.TB, c Codec) [][][]byte {
	t.Helper()
	b, err := os.ReadFile(streamFile[c])
	if err != nil {
		t.Fatal(err)
	}
	var aus [][][]byte
	var cur [][]byte
	sawVCL := false
	SplitAnnexB(b, func(nal []byte) bool {
		typ := c.NALType(nal)
		first := false
		if c.isVCL(typ) {
			h := c.headerLen()
			first = len(nal) > h && nal[h]&0x80 != 0 // first_mb_in_slice = 0 / first_slice_segment_in_pic_flag
		}
		if sawVCL && (first || !c.isVCL(typ)) {
			aus = append(aus, cur)
			cur, sawVCL = nil, false
		}
		cur = append(cur, nal)
		sawVCL = sawVCL || c.isVCL(typ)
		return true
	})
	if len(cur) > 0 {
		aus = append(aus, cur)
	}
	return aus
}

// annexB joins NAL units behind 4-byte start codes.
func annexB(nals [][]byte) []byte {
	var b []byte
	for _, n := range nals {
		b = append(append(b, 0, 0, 0, 1), n...)
	}
	return b
}

// packetize makes the RTP packets a camera would send for aus with
// gortsplib's own encoders (single NAL units, STAP-A/AP for small ones,
// FU-A/FU for large ones), payloads of at most maxPayload bytes, a
// timestamp 3000 apart per access unit.
func packetize(t testing.TB, c Codec, aus [][][]byte, maxPayload int) []*rtp.Packet {
	t.Helper()
	var encode func([][]byte) ([]*rtp.Packet, error)
	switch c {
	case H264:
		e := &rtph264.Encoder{PayloadType: 96, PacketizationMode: 1, PayloadMaxSize: maxPayload}
		if err := e.Init(); err != nil {
			t.Fatal(err)
		}
		encode = e.Encode
	case H265:
		e := &rtph265.Encoder{PayloadType: 96, PayloadMaxSize: maxPayload}
		if err := e.Init(); err != nil {
			t.Fatal(err)
		}
		encode = e.Encode
	}
	var pkts []*rtp.Packet
	for i, au := range aus {
		ps, err := encode(au)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			p.Timestamp = uint32(i * 3000)
		}
		pkts = append(pkts, ps...)
	}
	return pkts
}

// sink collects what a Depacketizer hands over, recycling at once unless
// hold is set.
type sink struct {
	d       *Depacketizer
	hold    bool
	got     [][]byte
	keys    []bool
	stamps  []uint32
	drops   []DropReason
	held    []*AccessUnit
	firstOK bool
}

func newSink(c Codec, n int) *sink {
	s := &sink{}
	s.d = NewDepacketizer(c, n, s.deliver, func(r DropReason) { s.drops = append(s.drops, r) })
	return s
}

func (s *sink) deliver(au *AccessUnit) {
	if len(s.got) == 0 {
		s.firstOK = au.Key
	}
	s.got = append(s.got, append([]byte(nil), au.Data...))
	s.keys = append(s.keys, au.Key)
	s.stamps = append(s.stamps, au.Timestamp)
	if s.hold {
		s.held = append(s.held, au)
		return
	}
	s.d.Recycle(au)
}

func (s *sink) push(p *rtp.Packet) { s.d.Push(p.Payload, p.SequenceNumber, p.Timestamp, p.Marker, 1) }
