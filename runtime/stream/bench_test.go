package stream

import (
	"encoding/json"
	"testing"

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
