package rtsp

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
)

// TestFramesAreTheStreamsPictures: H.264 and H.265 over TCP and UDP from
// a server looping a known stream: every frame delivered is exactly the
// picture libavcodec decodes from that stream (sha256 of its NV12 bytes),
// in order (consecutive pictures, modulo the loop), 170x100 NV12, with a
// capture time before it was ready, its clock named, Seq counting up.
func TestFramesAreTheStreamsPictures(t *testing.T) {
	dec := cpuDecoder(t)
	for _, c := range []h26x.Codec{h26x.H264, h26x.H265} {
		aus, sums := sample(t, c, dec)
		for _, transport := range []string{TransportTCP, TransportUDP} {
			t.Run(c.String()+"/"+transport, func(t *testing.T) {
				fs := fileServer(t, rtsptest.FileOptions{Codec: c, AUs: aus, UDP: transport == TransportUDP})
				s, pool, err := open(t, Options{URL: fs.URL, Transport: transport, Decoder: dec}, 6, 170*100*3/2)
				if err != nil {
					t.Fatal(err)
				}
				if f := s.Format(); f.Width != 170 || f.Height != 100 || f.Pixel != sensors.NV12 || f.FPS != 30 {
					t.Errorf("Format %v after Start", f)
				}
				prev := -1
				for i := 0; i < 40; i++ {
					f, skipped, err := nextFrame(t, s, 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					if skipped != 0 {
						t.Errorf("%d skipped on a lossless loopback", skipped)
					}
					k, ok := sums[sha256.Sum256(f.Data())]
					if !ok {
						t.Fatalf("frame %d is none of the stream's pictures", i)
					}
					if prev >= 0 && k != (prev+1)%len(sums) {
						t.Errorf("frame %d is picture %d after picture %d", i, k, prev)
					}
					if f.Seq != uint64(i) || f.Format.Width != 170 || f.TCapture <= 0 || f.TCapture > f.TReady || f.Clock == sensors.ClockLocal {
						t.Errorf("frame %d: seq %d format %v capture %d ready %d clock %v", i, f.Seq, f.Format, f.TCapture, f.TReady, f.Clock)
					}
					prev = k
					f.Slot.Release()
				}
				st := s.Stats()
				if st.Transport != transport || st.Frames != 40 || st.Depacketizer.Lost != 0 {
					t.Errorf("stats %+v", st)
				}
				t.Logf("%s; %+v", s.Describe(), st)
				s.Close()
				if pool.Leased() != 0 {
					t.Errorf("%d slots leased after Close", pool.Leased())
				}
			})
		}
	}
}
