package socketsink

import (
	"fmt"
	"testing"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/runtime/stream/streamtest"
)

// BenchmarkSocketPublish: what a pipeline pays per record to fan out to N
// connected clients (half NDJSON, half CBOR) that read as fast as they can.
func BenchmarkSocketPublish(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s, err := New(Options{Path: b.TempDir() + "/b.sock", NoActivation: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := 0; i < n; i++ {
				enc := stream.NDJSON
				if i%2 == 1 {
					enc = stream.CBOR
				}
				c, err := stream.Dial(b.Context(), s.Path(), &stream.Subscription{Encoding: enc})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				var m stream.Message
				if err := c.Next(&m); err != nil {
					b.Fatal(err)
				}
				go func() {
					var buf [64 << 10]byte
					for {
						if _, err := c.Conn().Read(buf[:]); err != nil {
							return
						}
					}
				}()
			}
			r := streamtest.BenchRecord()
			for i := 0; i < 20000; i++ { // warm up the record pool and write buffers
				s.Publish(r)
			}
			b.ReportAllocs()
			for b.Loop() {
				r.FrameSeq++
				s.Publish(r)
			}
			st := s.Stats()
			b.ReportMetric(float64(st.Dropped)/float64(st.Sent+st.Dropped), "dropped/delivery")
		})
	}
}
