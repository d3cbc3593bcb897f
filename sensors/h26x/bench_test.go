package h26x

import (
	"os"
	"testing"

	"github.com/bluenviron/gortsplib/v5/pkg/format/rtph264"
	"github.com/bluenviron/gortsplib/v5/pkg/format/rtph265"
	"github.com/pion/rtp"
)

// benchPackets is the stream the depacketizer benchmarks read: the
// committed sample, or the Annex-B file $EDGED_H26X_SAMPLE_H264 /
// _H265 names (docs/PERFORMANCE.md used a 1080p30 4 Mb/s one), as
// 1400-byte payloads.
func benchPackets(b *testing.B, c Codec) []*rtp.Packet {
	env := map[Codec]string{H264: "EDGED_H26X_SAMPLE_H264", H265: "EDGED_H26X_SAMPLE_H265"}[c]
	if f := os.Getenv(env); f != "" {
		defer func(old string) { streamFile[c] = old }(streamFile[c])
		streamFile[c] = f
	}
	return packetize(b, c, readAUs(b, c), 1400)
}

// BenchmarkDepacketize: ours per RTP packet, 0 allocations.
func BenchmarkDepacketize(b *testing.B) {
	for _, c := range []Codec{H264, H265} {
		b.Run(c.String(), func(b *testing.B) {
			pkts := benchPackets(b, c)
			aus := 0
			d := NewDepacketizer(c, 4, nil, func(DropReason) {})
			d.deliver = func(au *AccessUnit) { aus++; d.Recycle(au) }
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := pkts[i%len(pkts)]
				d.Push(p.Payload, uint16(i), p.Timestamp, p.Marker, 0)
			}
			b.ReportMetric(float64(b.N)/float64(max(aus, 1)), "packets/AU")
		})
	}
}

// BenchmarkDepacketizeGortsplib: gortsplib's rtph264/rtph265 decoders on
// the same packets, the baseline.
func BenchmarkDepacketizeGortsplib(b *testing.B) {
	for _, c := range []Codec{H264, H265} {
		b.Run(c.String(), func(b *testing.B) {
			pkts := benchPackets(b, c)
			var decode func(*rtp.Packet) ([][]byte, error)
			if c == H264 {
				d := &rtph264.Decoder{PacketizationMode: 1}
				d.Init()
				decode = d.Decode
			} else {
				d := &rtph265.Decoder{}
				d.Init()
				decode = d.Decode
			}
			aus := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := pkts[i%len(pkts)]
				p.SequenceNumber = uint16(i)
				if _, err := decode(p); err == nil {
					aus++
				}
			}
			b.ReportMetric(float64(b.N)/float64(max(aus, 1)), "packets/AU")
		})
	}
}
