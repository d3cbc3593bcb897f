package rtsp

import (
	"context"
	"testing"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// TestSteadyStateAllocatesNothing: from *rtp.Packet (as gortsplib hands
// it over) to a decoded frame in its slot — depacketizer, handoff, capture
// clock, decoder, NV12 write — nothing is allocated, sender reports and
// losses included. gortsplib's own receive path before the packet is not
// ours (docs/PERFORMANCE.md measures it).
func TestSteadyStateAllocatesNothing(t *testing.T) {
	dec := cpuDecoder(t)
	for _, c := range []h26x.Codec{h26x.H264, h26x.H265} {
		aus, err := h26xtest.ReadAccessUnits(samples[c], c)
		if err != nil {
			t.Fatal(err)
		}
		pkts := packets(t, c, aus)
		s, err := New(Options{Name: "cam", URL: "rtsp://127.0.0.1:1/cam", Decoder: dec})
		if err != nil {
			t.Fatal(err)
		}
		pool := sensorstest.NewHeapPool(4, 170*100*3/2)
		end := s.startOffline(t, c, pool)
		ctx := context.Background()
		i, steps := 0, 0
		seq := uint16(0)
		sr := &rtcp.SenderReport{SSRC: 1, NTPTime: 1}
		// One access unit's packets in, its frame out (the decoder holds
		// none back with one thread), or, after a loss, its drop.
		step := func() {
			if steps%97 == 50 {
				seq++ // a packet lost
			}
			for {
				p := pkts[i%len(pkts)]
				i++
				p.SequenceNumber = seq
				seq++
				s.sess.onRTP(p)
				if p.Marker {
					break
				}
			}
			if steps++; steps%50 == 7 {
				sr.RTPTime = pkts[(i-1)%len(pkts)].Timestamp
				s.sess.onRTCP(sr)
			}
			if f, err := s.Next(ctx); err == nil {
				f.Slot.Release()
			}
		}
		for range 2 * len(aus) {
			step()
		}
		if n := sensorstest.Mallocs(len(aus), step); n != 0 {
			t.Errorf("%s: %d allocations in %d frames", c, n, len(aus))
		}
		if st := s.Stats(); st.Frames < uint64(2*len(aus)) || st.ClockSenderReport == 0 || st.Depacketizer.Lost == 0 {
			t.Errorf("%s: %+v", c, st)
		}
		t.Logf("%s: %+v", c, s.Stats())
		end()
		s.Close()
		pool.Close()
	}
}

// startOffline makes s look started on a session without a network:
// packets are pushed as gortsplib's reading goroutine would.
// The session ends with end.
func (s *Source) startOffline(t testing.TB, c h26x.Codec, pool *sensorstest.Pool) (end func()) {
	t.Helper()
	s.run.Begin()
	s.begun, s.started, s.pool = true, true, pool
	s.dp.Reset(c)
	sess := &session{src: s, done: make(chan struct{}), rrDone: make(chan struct{}), track: track{codec: c}}
	close(sess.rrDone)
	sess.clk.rate = 90000
	sess.lastVideo.Store(1 << 62)
	s.sess = sess
	dec, err := s.opts.Decoder(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.dec = dec
	return func() { close(sess.done) }
}

// packets packetizes access units as the file server sends them.
func packets(t testing.TB, c h26x.Codec, aus [][]byte) []*rtp.Packet {
	t.Helper()
	var out []*rtp.Packet
	for i, au := range aus {
		ps := rtsptest.Packetize(c, au, 1400)
		for _, p := range ps {
			p.Timestamp = uint32(i * 3000)
		}
		out = append(out, ps...)
	}
	return out
}
