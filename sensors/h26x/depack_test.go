package h26x

import (
	"bytes"
	"testing"

	"github.com/pion/rtp"
)

// TestDepacketizeIsIdentity: every access unit of the sample streams comes
// out byte for byte as it went into gortsplib's packetizers (single NAL
// units, STAP-A/AP, FU-A/FU at 300-byte payloads), the key ones flagged,
// and nothing is dropped.
func TestDepacketizeIsIdentity(t *testing.T) {
	for _, c := range []Codec{H264, H265} {
		t.Run(c.String(), func(t *testing.T) {
			aus := readAUs(t, c)
			pkts := packetize(t, c, aus, 300)
			s := newSink(c, 4)
			for _, p := range pkts {
				s.push(p)
			}
			if len(s.got) != len(aus) || len(s.drops) != 0 {
				t.Fatalf("%d access units delivered, %d dropped (%v); want %d and none", len(s.got), len(s.drops), s.drops, len(aus))
			}
			keys := 0
			for i := range aus {
				if !bytes.Equal(s.got[i], annexB(aus[i])) {
					t.Fatalf("access unit %d differs: %d bytes, want %d", i, len(s.got[i]), len(annexB(aus[i])))
				}
				if want := c.isRandomAccess(c.NALType(firstVCL(c, aus[i]))); s.keys[i] != want {
					t.Errorf("access unit %d: Key %v, want %v", i, s.keys[i], want)
				}
				if s.keys[i] {
					keys++
				}
				if s.stamps[i] != uint32(i*3000) {
					t.Errorf("access unit %d: timestamp %d", i, s.stamps[i])
				}
			}
			if keys < 3 {
				t.Errorf("only %d key access units in 2 s with a key every 15 frames", keys)
			}
			st := s.d.Stats()
			if st.Packets != uint64(len(pkts)) || st.Delivered != uint64(len(aus)) || st.Lost != 0 {
				t.Errorf("stats %+v", st)
			}
			t.Logf("%d access units (%d keys) from %d packets", len(aus), keys, len(pkts))
		})
	}
}

func firstVCL(c Codec, au [][]byte) []byte {
	for _, n := range au {
		if c.isVCL(c.NALType(n)) {
			return n
		}
	}
	return nil
}

// keyAfter is the index of the first key access unit after i.
func keyAfter(t *testing.T, c Codec, aus [][][]byte, i int) int {
	for j := i + 1; j < len(aus); j++ {
		if c.isRandomAccess(c.NALType(firstVCL(c, aus[j]))) {
			return j
		}
	}
	t.Fatalf("no key access unit after %d", i)
	return 0
}

// TestLossDropsUntilKey: one RTP packet lost in the middle of a GOP costs
// its access unit (loss) and every one after it (wait_key) until the next
// key, which comes out intact, and so does everything after it.
func TestLossDropsUntilKey(t *testing.T) {
	for _, c := range []Codec{H264, H265} {
		t.Run(c.String(), func(t *testing.T) {
			aus := readAUs(t, c)
			pkts := packetize(t, c, aus, 300)
			victim := 20 // an access unit mid-GOP
			key := keyAfter(t, c, aus, victim)
			s := newSink(c, 4)
			lostOne := false
			for _, p := range pkts {
				if !lostOne && p.Timestamp == uint32(victim*3000) && !p.Marker {
					lostOne = true // its first packet
					continue
				}
				s.push(p)
			}
			wantDrops := key - victim
			if len(s.drops) != wantDrops || s.drops[0] != DropLoss {
				t.Fatalf("drops %v; want loss then %d wait_key", s.drops, wantDrops-1)
			}
			for _, r := range s.drops[1:] {
				if r != DropWaitKey {
					t.Fatalf("drops %v", s.drops)
				}
			}
			if len(s.got) != len(aus)-wantDrops {
				t.Fatalf("%d delivered, want %d", len(s.got), len(aus)-wantDrops)
			}
			if !bytes.Equal(s.got[victim], annexB(aus[key])) || !s.keys[victim] {
				t.Fatal("the first access unit after the loss is not the next key, intact")
			}
			st := s.d.Stats()
			if st.Lost != 1 || st.Dropped[DropLoss-1] != 1 || st.Dropped[DropWaitKey-1] != uint64(wantDrops-1) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestFragmentWithoutStart: an FU whose start fragment never came (the
// sequence numbers renumbered so there is no gap: a sender's bug, or a
// reorder buffer's flush) breaks its access unit and what depends on it.
func TestFragmentWithoutStart(t *testing.T) {
	c := H264
	aus := readAUs(t, c)
	pkts := packetize(t, c, aus, 300)
	var kept []*rtp.Packet
	dropped := false
	for _, p := range pkts {
		if !dropped && p.Timestamp == 20*3000 && p.Payload[0]&0x1f == nal264FUA && p.Payload[1]&0x80 != 0 {
			dropped = true
			continue
		}
		kept = append(kept, p)
	}
	for i, p := range kept {
		p.SequenceNumber = uint16(i)
	}
	s := newSink(c, 4)
	for _, p := range kept {
		s.push(p)
	}
	if !dropped || len(s.drops) == 0 || s.drops[0] != DropBroken {
		t.Fatalf("drops %v", s.drops)
	}
	if s.d.Stats().Lost != 0 {
		t.Error("counted as lost")
	}
	key := keyAfter(t, c, aus, 20)
	if len(s.drops) != key-20 {
		t.Errorf("%d dropped, want %d (through the next key)", len(s.drops), key-20)
	}
}

// TestNoMarkerBits: a camera that never sets the marker bit: each access
// unit ends when the next timestamp begins.
func TestNoMarkerBits(t *testing.T) {
	c := H265
	aus := readAUs(t, c)
	pkts := packetize(t, c, aus, 300)
	s := newSink(c, 4)
	for _, p := range pkts {
		p.Marker = false
		s.push(p)
	}
	if len(s.got) != len(aus)-1 || len(s.drops) != 0 {
		t.Fatalf("%d delivered (%v dropped), want all but the last, which has not ended", len(s.got), s.drops)
	}
	for i := range s.got {
		if !bytes.Equal(s.got[i], annexB(aus[i])) {
			t.Fatalf("access unit %d differs", i)
		}
	}
}

// TestParamsWithTheirOwnTimestamp: parameter sets sent before the key
// picture with another timestamp (and a marker bit) join that picture.
func TestParamsWithTheirOwnTimestamp(t *testing.T) {
	c := H264
	aus := readAUs(t, c)
	var first [][]byte // the params of the first access unit, sent alone
	var pic [][]byte
	for _, n := range aus[0] {
		if c.isParam(c.NALType(n)) {
			first = append(first, n)
		} else {
			pic = append(pic, n)
		}
	}
	pkts := packetize(t, c, [][][]byte{first, pic}, 1400)
	pkts[0].Marker = true
	s := newSink(c, 2)
	for _, p := range pkts {
		s.push(p)
	}
	if len(s.got) != 1 || !bytes.Equal(s.got[0], annexB(append(first, pic...))) || !s.keys[0] {
		t.Fatalf("%d delivered, drops %v", len(s.got), s.drops)
	}
	if s.stamps[0] != 3000 {
		t.Errorf("timestamp %d, want the picture's", s.stamps[0])
	}
}

// TestOverrun: a consumer that recycles nothing gets n access units; the
// next are dropped (overrun), then, once it recycles, waits for a key.
func TestOverrun(t *testing.T) {
	c := H264
	aus := readAUs(t, c)
	pkts := packetize(t, c, aus, 1400)
	s := newSink(c, 3)
	s.hold = true
	i := 0
	for ; len(s.drops) == 0; i++ {
		s.push(pkts[i])
	}
	if len(s.got) != 3 || s.drops[0] != DropOverrun {
		t.Fatalf("%d delivered before the first drop %v", len(s.got), s.drops)
	}
	for _, au := range s.held {
		s.d.Recycle(au)
	}
	s.hold = false
	for ; i < len(pkts); i++ {
		s.push(pkts[i])
	}
	if !s.keys[3] {
		t.Error("after the overrun, delivery resumed before a key")
	}
	if s.d.Free() != 3 {
		t.Errorf("%d buffers free at the end, want 3", s.d.Free())
	}
}

// TestTooBig: an access unit over MaxAccessUnit is dropped, not grown.
func TestTooBig(t *testing.T) {
	s := newSink(H264, 2)
	payload := make([]byte, 1402)
	seq := uint16(0)
	push := func(b []byte, marker bool) {
		s.d.Push(b, seq, 0, marker, 0)
		seq++
	}
	payload[0], payload[1] = 28, 0x80|5 // FU-A start of an IDR
	push(payload, false)
	payload[1] = 5
	for range MaxAccessUnit / 1400 {
		push(payload, false)
	}
	payload[1] = 0x40 | 5
	push(payload, true)
	if len(s.got) != 0 || len(s.drops) != 1 || s.drops[0] != DropTooBig {
		t.Fatalf("delivered %d, drops %v", len(s.got), s.drops)
	}
	for _, au := range s.d.all {
		if cap(au.buf) > MaxAccessUnit+Padding {
			t.Errorf("a buffer grew to %d bytes", cap(au.buf))
		}
	}
}

// TestUnsupportedAndLate: STAP-B is refused (unsupported), a duplicate
// packet is ignored.
func TestUnsupportedAndLate(t *testing.T) {
	s := newSink(H264, 2)
	idr := []byte{0x65, 0x88, 0x84}
	s.d.Push(idr, 10, 0, true, 0)
	s.d.Push(idr, 10, 0, true, 0) // duplicate
	s.d.Push([]byte{25, 0, 0}, 11, 3000, true, 0)
	if len(s.got) != 1 || len(s.drops) != 1 || s.drops[0] != DropUnsupported {
		t.Fatalf("delivered %d, drops %v", len(s.got), s.drops)
	}
	if st := s.d.Stats(); st.Late != 1 {
		t.Errorf("late %d", st.Late)
	}
}

// TestLeadingPicturesAfterCRA: resuming at a CRA drops the RASL pictures
// that follow it (their references are gone) but not RADL or trailing
// ones; after a trailing picture nothing is dropped.
func TestLeadingPicturesAfterCRA(t *testing.T) {
	s := newSink(H265, 2)
	nal := func(typ int) []byte { return []byte{byte(typ << 1), 1, 0xaf} }
	seq := uint16(0)
	send := func(typ int) {
		s.d.Push(nal(typ), seq, uint32(seq)*3000, true, 0)
		seq++
	}
	send(1)  // trailing before any key: wait_key
	send(21) // CRA: delivered
	send(8)  // RASL_N: leading
	send(7)  // RADL_R: decodable
	send(9)  // RASL_R: leading
	send(1)  // TRAIL_R: delivered, ends the leading pictures
	send(8)  // a RASL now would be a stream error, but it is not ours to drop
	want := []DropReason{DropWaitKey, DropLeading, DropLeading}
	if len(s.drops) != len(want) || s.drops[0] != want[0] || s.drops[1] != want[1] || s.drops[2] != want[2] {
		t.Fatalf("drops %v, want %v", s.drops, want)
	}
	if len(s.got) != 4 {
		t.Fatalf("%d delivered, want CRA, RADL, TRAIL, RASL", len(s.got))
	}
}

// TestAnnexBInPayload: a camera that sends start codes inside its RTP
// payloads (several NAL units in one) is read as Annex-B.
func TestAnnexBInPayload(t *testing.T) {
	c := H264
	aus := readAUs(t, c)
	s := newSink(c, 2)
	for i, au := range aus[:5] {
		s.d.Push(annexB(au), uint16(i), uint32(i*3000), true, 0)
	}
	if len(s.got) != 5 {
		t.Fatalf("%d delivered, drops %v", len(s.got), s.drops)
	}
	for i := range s.got {
		if !bytes.Equal(s.got[i], annexB(aus[i])) {
			t.Fatalf("access unit %d differs", i)
		}
	}
}

// TestSPSOfAccessUnit: a key access unit points at its SPS, which parses
// to the stream's size.
func TestSPSOfAccessUnit(t *testing.T) {
	for _, c := range []Codec{H264, H265} {
		aus := readAUs(t, c)
		s := newSink(c, 2)
		s.hold = true
		for _, p := range packetize(t, c, aus[:1], 1400) {
			s.push(p)
		}
		if len(s.held) != 1 || s.held[0].SPS == nil {
			t.Fatalf("%s: no SPS in the first access unit", c)
		}
		sps, err := ParseSPS(c, s.held[0].SPS)
		if err != nil || sps.Width != 170 || sps.Height != 100 {
			t.Errorf("%s: %+v %v", c, sps, err)
		}
	}
}

// TestSteadyStateAllocatesNothing: once its buffers have grown, pushing a
// whole stream (losses included) allocates nothing.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	for _, c := range []Codec{H264, H265} {
		aus := readAUs(t, c)
		pkts := packetize(t, c, aus, 1400)
		d := NewDepacketizer(c, 4, nil, func(DropReason) {})
		d.deliver = d.Recycle
		seq := uint16(0)
		run := func() {
			for i, p := range pkts {
				if i%97 == 50 {
					seq++ // a loss now and then
				}
				d.Push(p.Payload, seq, p.Timestamp, p.Marker, 0)
				seq++
			}
		}
		run()
		run()
		if n := testing.AllocsPerRun(5, run); n != 0 {
			t.Errorf("%s: %v allocations per pass of %d packets", c, n, len(pkts))
		}
	}
}
