package stream

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/creack/pty"
	"github.com/fxamacker/cbor/v2"
)

// BenchmarkEncode: cost of encoding one typical detection result (10 boxes,
// a top-3 list, two sensor samples) in each wire encoding, next to
// reflection-based baselines of the same data (encoding/json and
// fxamacker/cbor marshalling the decoded struct).
func BenchmarkEncode(b *testing.B) {
	r := benchRecord()
	d := wantDecoded(r, 1)
	var buf, scratch []byte
	report := func(b *testing.B, n int) { b.ReportMetric(float64(n), "bytes/record") }
	b.Run("ndjson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = AppendNDJSON(buf[:0], r, uint64(i))
		}
		report(b, len(buf))
	})
	b.Run("cbor", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = AppendCBOR(buf[:0], r, uint64(i))
		}
		report(b, len(buf)+4)
	})
	b.Run("cobs-cbor", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, scratch = AppendSerialFrame(buf[:0], scratch, r, uint64(i))
		}
		report(b, len(buf))
	})
	b.Run("baseline-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for i := 0; b.Loop(); i++ {
			d.Seq = uint64(i)
			out, _ = json.Marshal(&d)
		}
		report(b, len(out)+1)
	})
	b.Run("baseline-fxamacker-cbor", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for i := 0; b.Loop(); i++ {
			d.Seq = uint64(i)
			out, _ = cbor.Marshal(&d)
		}
		report(b, len(out)+4)
	})
}

// BenchmarkDecode: client-side decoding of the same record.
func BenchmarkDecode(b *testing.B) {
	r := benchRecord()
	line := AppendNDJSON(nil, r, 1)
	c := AppendCBOR(nil, r, 1)
	b.Run("ndjson", func(b *testing.B) {
		b.ReportAllocs()
		var d Decoded
		for b.Loop() {
			if err := DecodeJSON(line, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cbor", func(b *testing.B) {
		b.ReportAllocs()
		var d Decoded
		for b.Loop() {
			if err := DecodeCBOR(c, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSocketPublish: what a pipeline pays per record to fan out to N
// connected clients (half NDJSON, half CBOR) that read as fast as they can.
func BenchmarkSocketPublish(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s, err := NewSocket(SocketOptions{Path: b.TempDir() + "/b.sock", NoActivation: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := 0; i < n; i++ {
				enc := NDJSON
				if i%2 == 1 {
					enc = CBOR
				}
				c, err := Dial(b.Context(), s.Path(), &Subscription{Encoding: enc})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				var m Message
				if err := c.Next(&m); err != nil {
					b.Fatal(err)
				}
				go func() {
					var buf [64 << 10]byte
					for {
						if _, err := c.conn.Read(buf[:]); err != nil {
							return
						}
					}
				}()
			}
			r := benchRecord()
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

// BenchmarkSerialPublish: Publish into the serial sink (encoding, CRC,
// COBS, queue); the port is a pty drained by a reader.
func BenchmarkSerialPublish(b *testing.B) {
	m, sl, err := pty.Open()
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	defer sl.Close()
	go io.Copy(io.Discard, m)
	s, err := NewSerial(SerialOptions{Device: sl.Name(), Baud: 921600})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		r.FrameSeq++
		s.Publish(r)
	}
}
