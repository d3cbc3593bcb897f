package stream

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// goldenSeeds returns the golden files with the given extension.
func goldenSeeds(f *testing.F, ext string) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("testdata", "golden", "*"+ext))
	if len(paths) == 0 {
		f.Fatalf("no golden %s files (run go test -run TestGolden -update)", ext)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// drain decodes everything in data and checks the decoder's invariants.
func drain(t *testing.T, data []byte, opts DecoderOptions) {
	dec := NewDecoder(bytes.NewReader(data), opts)
	var m Message
	for i := 0; ; i++ {
		err := dec.Next(&m)
		if err != nil {
			break
		}
		if len(m.Raw) > opts.MaxRecord {
			t.Fatalf("record of %d bytes passed a %d-byte limit", len(m.Raw), opts.MaxRecord)
		}
		if m.Rec.Type == "" {
			t.Fatal("record without a type")
		}
		if j := m.JSON(); !json.Valid(j) {
			t.Fatalf("JSON() of a decoded record is not JSON: %q", j)
		}
		if i > len(data) {
			t.Fatal("more records than input bytes")
		}
	}
	st := dec.Stats()
	if st.Records > uint64(len(data)) || st.CRCErrors+st.FrameErrors > uint64(len(data))+1 {
		t.Fatalf("implausible stats %+v for %d bytes", st, len(data))
	}
}

// FuzzSerialDecoder: arbitrary bytes on a serial line never panic the
// COBS/CRC decoder, never yield more than the limit, and whatever it yields
// carried a valid CRC.
func FuzzSerialDecoder(f *testing.F) {
	for _, s := range goldenSeeds(f, ".cobs") {
		f.Add(s)
		f.Add(append(append([]byte{0, 1, 2}, s...), s...))
		if len(s) > 8 {
			d := append([]byte(nil), s...)
			d[len(d)/2] ^= 0x10
			f.Add(d)
		}
	}
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{5, 1, 1, 1, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		drain(t, data, DecoderOptions{Framing: FramingSerial, MaxRecord: 512})
		// Frames that decode must survive a re-frame unchanged.
		dec := NewDecoder(bytes.NewReader(data), DecoderOptions{Framing: FramingSerial, MaxRecord: 512})
		var m Message
		for dec.Next(&m) == nil {
			fr := appendSerialFrame(nil, append([]byte(nil), m.Raw...))
			d2 := NewDecoder(bytes.NewReader(fr), DecoderOptions{Framing: FramingSerial})
			var m2 Message
			if err := d2.Next(&m2); err != nil || !bytes.Equal(m2.Raw, m.Raw) {
				t.Fatalf("re-framed payload does not decode: %v", err)
			}
		}
	})
}

// FuzzCBORDecoder: arbitrary length-prefixed CBOR (a socket in cbor
// encoding, or a capture file) never panics the decoder or passes its
// limits.
func FuzzCBORDecoder(f *testing.F) {
	for _, s := range goldenSeeds(f, ".cbor") {
		f.Add(s)
		f.Add(s[4:])
		f.Add(append(append([]byte(nil), s...), s[:len(s)/2]...))
	}
	f.Add([]byte{0, 0, 0, 5, 0xa1, 0x61, 'x', 0x9f, 0xff})
	f.Add([]byte{0, 0, 0, 9, 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		drain(t, data, DecoderOptions{Framing: FramingCBOR, MaxRecord: 4096})
		drain(t, data, DecoderOptions{Framing: FramingAuto, MaxRecord: 4096})
		var d Decoded
		if len(data) <= 4096 {
			if err := DecodeCBOR(data, &d); err == nil && d.Type == "" {
				t.Fatal("accepted a record without a type")
			}
		}
	})
}

// FuzzNDJSONDecoder: arbitrary lines never panic the line decoder.
func FuzzNDJSONDecoder(f *testing.F) {
	for _, s := range goldenSeeds(f, ".ndjson") {
		f.Add(s)
		f.Add(bytes.TrimSuffix(s, []byte("\n")))
	}
	f.Add([]byte("{\n{}\n\n{\"type\":1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		drain(t, data, DecoderOptions{Framing: FramingNDJSON, MaxRecord: 4096})
	})
}

// FuzzParseRequest: client input never panics the parser; what it accepts
// is well-formed and round-trips.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"subscribe":{"pipelines":["front","rear"],"encoding":"cbor"}}`,
		`{"subscribe":{"pipelines":[]}}`,
		`{"subscribe":{}}`,
		`{"subscribe":{"encoding":"ndjson"}}`,
		`{"reload":"engines"}`,
		`{"reload":"config"}`,
		`{"subscribe":{"pipelines":null},"reload":"engines"}`,
		`{"subscribe":{"pipelines":[""]}}`,
		`{} {}`,
		`[1,2,3]`,
		`{"subscribe":{"pipelines":["a"],"x":1}}`,
		"\x00\xff",
		strings.Repeat(`{"subscribe":`, 100),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := ParseRequest(line)
		if err != nil {
			if req.Subscribe != nil || req.Control != nil {
				t.Fatal("error with a request")
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("error message of %d bytes echoes the input", len(err.Error()))
			}
			return
		}
		if len(line) >= MaxRequestLine {
			t.Fatal("accepted an oversized line")
		}
		switch {
		case req.Subscribe != nil && req.Control == nil:
			if len(req.Subscribe.Pipelines) > maxSubscribePipelines {
				t.Fatal("too many pipelines accepted")
			}
			for _, p := range req.Subscribe.Pipelines {
				if p == "" || len(p) > maxPipelineName {
					t.Fatalf("bad pipeline name %q accepted", p)
				}
			}
			again, err := ParseRequest(bytes.TrimSuffix(req.Subscribe.AppendRequest(nil), []byte("\n")))
			if err != nil || again.Subscribe == nil || !reflect.DeepEqual(*again.Subscribe, *req.Subscribe) {
				t.Fatalf("subscription %+v does not round-trip: %+v %v", *req.Subscribe, again.Subscribe, err)
			}
		case req.Control != nil && req.Subscribe == nil:
			if req.Control.Reload != "engines" {
				t.Fatalf("accepted reload of %q", req.Control.Reload)
			}
		default:
			t.Fatal("accepted request is neither subscribe nor control")
		}
	})
}

// FuzzEncode: any strings and numbers give valid NDJSON and well-formed
// CBOR that decode to the same record.
func FuzzEncode(f *testing.F) {
	f.Add("front", "person", "engine_rejected", "bad \"x\"\n", float32(0.5), float64(9.81), int64(-1), uint64(7))
	f.Add("\xff\xfe", "\u2028", "", "\x00", float32(math.NaN()), math.Inf(1), int64(math.MinInt64), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, pipeline, label, event, reason string, score float32, v float64, tns int64, seq uint64) {
		recs := []Record{
			{Kind: KindResult, Pipeline: pipeline, FrameSeq: seq, TCaptureNs: tns,
				Engine: EngineRef{Name: label, Generation: seq, SHA256: reason},
				Outputs: []Output{
					{Name: label, Kind: OutputDetections, Detections: []Detection{{Box: [4]float32{score, -score, 0, 1}, Class: int(tns % 100), Label: label, Score: score}}},
					{Name: "raw", Kind: OutputRaw, Shape: []int64{tns}, Data: []float32{score, float32(v)}},
				}},
			{Kind: KindStatus, Event: event, Pipeline: pipeline, Source: label, Reason: reason, TNs: tns,
				Engine: EngineRef{Name: label, Generation: seq, SHA256: reason}},
			{Kind: KindError, Reason: reason, TNs: tns},
		}
		if label == "raw" || label == "cls" {
			return // output names must be distinct
		}
		recs[0].Outputs = append(recs[0].Outputs, Output{Name: "cls", Kind: OutputClasses, Classes: []Class{{Index: int(seq % 1000), Label: reason, Score: score}}})
		for i := range recs {
			r := &recs[i]
			line := AppendNDJSON(nil, r, seq)
			if !json.Valid(line) || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("invalid NDJSON %q", line)
			}
			var dj, dc Decoded
			if err := DecodeJSON(line, &dj); err != nil {
				t.Fatal(err)
			}
			c := AppendCBOR(nil, r, seq)
			if err := cbor.Wellformed(c); err != nil {
				t.Fatalf("CBOR not well-formed: %v", err)
			}
			if err := DecodeCBOR(c, &dc); err != nil {
				t.Fatal(err)
			}
			if dj.Seq != seq || dc.Seq != seq {
				t.Fatalf("seq %d decodes as %d / %d", seq, dj.Seq, dc.Seq)
			}
			if want := wantDecoded(r, seq); !reflect.DeepEqual(dj, want) || !reflect.DeepEqual(dc, want) {
				t.Fatalf("decoded\nJSON %+v\nCBOR %+v\nwant %+v", dj, dc, want)
			}
			fr, _ := AppendSerialFrame(nil, nil, r, seq)
			dec := NewDecoder(bytes.NewReader(fr), DecoderOptions{Framing: FramingSerial, MaxRecord: len(c) + 1})
			var m Message
			if err := dec.Next(&m); err != nil || !bytes.Equal(m.Raw, c) {
				t.Fatalf("serial frame: %v", err)
			}
			if err := dec.Next(&m); err != io.EOF {
				t.Fatalf("extra data after the frame: %v", err)
			}
		}
	})
}
