package rtsp

import (
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
)

// TestUDPLossInANetns: random loss of 2 % of the UDP datagrams (RTP and
// RTCP, both ways), made by nftables in a network namespace of the test's
// own, with the file server's moving picture and with GStreamer: every
// frame delivered is exactly a picture of the stream (or has the bars
// right), losses are counted, and what follows a loss is dropped until the
// next key; nothing corrupt gets through.
func TestUDPLossInANetns(t *testing.T) {
	dec := cpuDecoder(t)
	if !rtsptest.InNetns() {
		rtsptest.Python(t) // the run inside needs GStreamer too
		dropped := rtsptest.RunInLossyNetns(t, 20, "^TestUDPLossInANetns$")
		if dropped == 0 {
			t.Error("nftables dropped no datagram")
		}
		t.Logf("nftables dropped %d datagrams", dropped)
		return
	}
	t.Run("file", func(t *testing.T) {
		aus, sums := sample(t, h26x.H264, dec)
		keys := map[int]bool{}
		for i, au := range aus {
			keys[i] = isKey(au)
		}
		fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, UDP: true, PayloadMax: 300})
		s, _, err := open(t, Options{URL: fs.URL, Transport: TransportUDP, Decoder: dec}, 6, 170*100*3/2)
		if err != nil {
			t.Fatal(err)
		}
		prev, frames, resumed := -1, 0, 0
		for t0 := time.Now(); time.Since(t0) < 10*time.Second; {
			f, skipped, err := nextFrame(t, s, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			k, ok := sums[sha256Of(f)]
			if !ok {
				t.Fatalf("frame %d is not a picture of the stream: corrupt", f.Seq)
			}
			if prev >= 0 && k != (prev+1)%len(aus) {
				if !keys[k] {
					t.Errorf("after picture %d came picture %d (%d skipped), which is no key", prev, k, skipped)
				}
				resumed++
			}
			prev = k
			frames++
			f.Slot.Release()
		}
		st := s.Stats()
		t.Logf("%d frames, resumed at a key %d times; %+v", frames, resumed, st)
		if st.Depacketizer.Lost == 0 || st.Depacketizer.Dropped[h26x.DropWaitKey-1] == 0 || resumed == 0 || frames < 30 {
			t.Errorf("no loss seen, or nothing delivered: %+v", st)
		}
	})
	t.Run("gstreamer", func(t *testing.T) {
		g := rtsptest.StartGStreamer(t, "--gop", "15")
		s, _, err := open(t, Options{URL: g.URL, Transport: TransportUDP, Decoder: dec}, 6, 640*480*3/2)
		if err != nil {
			t.Fatal(err)
		}
		frames := 0
		for t0 := time.Now(); time.Since(t0) < 8*time.Second; {
			f, _, err := nextFrame(t, s, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			checkBars(t, f)
			frames++
			f.Slot.Release()
		}
		st := s.Stats()
		t.Logf("%d frames; %+v", frames, st)
		if st.Depacketizer.Lost == 0 || frames < 30 {
			t.Errorf("no loss seen, or nothing delivered: %+v", st)
		}
	})
}

// isKey reports whether an Annex-B H.264 access unit holds an IDR slice.
func isKey(au []byte) bool {
	key := false
	h26x.SplitAnnexB(au, func(n []byte) bool {
		key = key || h26x.H264.NALType(n) == 5
		return !key
	})
	return key
}
