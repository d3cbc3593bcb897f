package stream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// wantDecoded maps a Record to what a client must decode, written
// independently of the encoders.
func wantDecoded(r *Record, seq uint64) Decoded {
	num := func(f float32) float32 {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return 0
		}
		return f
	}
	str := validUTF8
	d := Decoded{Type: r.Kind.String(), V: Version, Seq: seq, Device: validUTF8(r.Device)}
	switch r.Kind {
	case KindResult:
		d.Pipeline, d.FrameSeq, d.TCapture, d.CaptureClock = str(r.Pipeline), r.FrameSeq, r.TCaptureNs, str(r.CaptureClock)
		d.Source = str(r.Source)
		d.Engine = &DecodedEngine{Name: str(r.Engine.Name), Generation: r.Engine.Generation, SHA256: str(r.Engine.SHA256), Batch: r.Engine.Batch}
		l := r.Latency
		d.LatencyUs = &DecodedLatency{Fill: l.Fill, Queue: l.Queue, Batch: l.Batch, Pre: l.Pre, Infer: l.Infer, Post: l.Post, Encode: l.Encode, Total: l.Total}
		d.Outputs = map[string]DecodedOutput{}
		for _, o := range r.Outputs {
			var do DecodedOutput
			switch o.Kind {
			case OutputRaw:
				do.Shape, do.Truncated, do.DType = o.Shape, o.Truncated, o.DType
				for _, v := range o.Data {
					do.Data = append(do.Data, num(v))
				}
			case OutputClasses:
				for _, c := range o.Classes {
					do.Top = append(do.Top, DecodedClass{Index: c.Index, Label: str(c.Label), Score: num(c.Score)})
				}
			case OutputDetections:
				for _, x := range o.Detections {
					box := x.Box
					for i := range box {
						box[i] = num(box[i])
					}
					dd := DecodedDetection{Box: box, Class: x.Class, Label: str(x.Label), Score: num(x.Score)}
					for k := 0; o.KeypointDims > 0 && k+o.KeypointDims <= len(x.Keypoints); k += o.KeypointDims {
						var kp []float32
						for _, v := range x.Keypoints[k : k+o.KeypointDims] {
							kp = append(kp, num(v))
						}
						dd.Keypoints = append(dd.Keypoints, kp)
					}
					do.Detections = append(do.Detections, dd)
				}
			}
			d.Outputs[str(o.Name)] = do
		}
		for _, s := range r.Sensors {
			ds := DecodedSample{Sensor: str(s.Sensor), Seq: s.Seq, TNs: s.TMono, Kind: str(s.Kind), Values: map[string]float64{}}
			for i := 0; i < s.N; i++ {
				k := strconv.Itoa(i)
				if i < len(s.Names) {
					k = str(s.Names[i])
				}
				if v := s.Values[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
					ds.Values[k] = v
				} else {
					ds.Values[k] = 0
				}
			}
			d.Sensors = append(d.Sensors, ds)
		}
	case KindError:
		d.Error, d.TNs = str(r.Reason), r.TNs
	default:
		d.Event, d.Pipeline, d.Source, d.Reason, d.TNs = str(r.Event), str(r.Pipeline), str(r.Source), str(r.Reason), r.TNs
		d.Model, d.Sink, d.File = str(r.Model), str(r.Sink), str(r.File)
		if r.Engine.Name != "" {
			d.Engine = &DecodedEngine{Name: str(r.Engine.Name), Generation: r.Engine.Generation, SHA256: str(r.Engine.SHA256), Serving: str(r.Engine.Serving)}
		}
	}
	return d
}

// validUTF8 replaces each invalid byte of s with U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

func wireCBOR(r *Record, seq uint64) []byte {
	var e Encoded
	if _, ok := e.encode(r, false, true, 0); !ok {
		panic("does not fit")
	}
	return e.AppendWire(nil, CBOR, seq)
}

func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const seq = 7
	for _, tc := range sampleRecords() {
		t.Run(tc.name, func(t *testing.T) {
			r := &tc.rec
			frame, _ := AppendSerialFrame(nil, nil, r, seq)
			files := []struct {
				ext  string
				data []byte
			}{
				{".ndjson", AppendNDJSON(nil, r, seq)},
				{".cbor", wireCBOR(r, seq)},
				{".cobs", frame},
			}
			for _, f := range files {
				path := filepath.Join(dir, tc.name+f.ext)
				if *update {
					if err := os.WriteFile(path, f.data, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
				}
				if !bytes.Equal(f.data, want) {
					t.Errorf("%s differs from the golden file:\n got %q\nwant %q\n(run go test -run TestGolden -update if the change is intended, and document it in docs/PROTOCOL.md)", path, f.data, want)
				}
			}

			want := wantDecoded(r, seq)

			line := files[0].data
			if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("NDJSON record is not exactly one line: %q", line)
			}
			if !json.Valid(line) {
				t.Fatalf("invalid JSON: %q", line)
			}
			var got Decoded
			if err := DecodeJSON(line, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("NDJSON decodes to\n%+v\nwant\n%+v", got, want)
			}

			c := files[1].data
			if c[0] != 0 || int(binary.BigEndian.Uint32(c)) != len(c)-4 {
				t.Fatalf("bad CBOR length prefix % x for %d bytes", c[:4], len(c)-4)
			}
			if err := cbor.Wellformed(c[4:]); err != nil {
				t.Fatalf("CBOR not well-formed: %v", err)
			}
			got = Decoded{}
			if err := DecodeCBOR(c[4:], &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("CBOR decodes to\n%+v\nwant\n%+v", got, want)
			}

			fr := files[2].data
			if bytes.IndexByte(fr, 0) != len(fr)-1 {
				t.Fatalf("serial frame has a zero byte before its end: % x", fr)
			}
			dec := NewDecoder(bytes.NewReader(fr), DecoderOptions{Framing: FramingSerial})
			var m Message
			if err := dec.Next(&m); err != nil {
				t.Fatalf("serial frame: %v (stats %+v)", err, dec.Stats())
			}
			if !reflect.DeepEqual(m.Rec, want) {
				t.Errorf("serial frame decodes to\n%+v\nwant\n%+v", m.Rec, want)
			}
			if !bytes.Equal(m.Raw, c[4:]) {
				t.Errorf("serial payload differs from the socket CBOR map")
			}
		})
	}
}

// The same record spliced for two clients differs only in seq.
func TestSpliceSeq(t *testing.T) {
	for _, tc := range sampleRecords() {
		var e Encoded
		if _, ok := e.encode(&tc.rec, true, true, 0); !ok {
			t.Fatal("does not fit")
		}
		for _, seq := range []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, 1 << 32, math.MaxUint64} {
			if got, want := e.AppendWire(nil, NDJSON, seq), AppendNDJSON(nil, &tc.rec, seq); !bytes.Equal(got, want) {
				t.Fatalf("%s seq %d: spliced NDJSON %q, want %q", tc.name, seq, got, want)
			}
			got := e.AppendWire(nil, CBOR, seq)
			if want := AppendCBOR(nil, &tc.rec, seq); !bytes.Equal(got[4:], want) {
				t.Fatalf("%s seq %d: spliced CBOR % x, want % x", tc.name, seq, got[4:], want)
			}
			var d Decoded
			if err := DecodeCBOR(got[4:], &d); err != nil || d.Seq != seq {
				t.Fatalf("%s: CBOR seq %d decodes to %d (%v)", tc.name, seq, d.Seq, err)
			}
			if err := DecodeJSON(e.AppendWire(nil, NDJSON, seq), &d); err != nil || d.Seq != seq {
				t.Fatalf("%s: NDJSON seq %d decodes to %d (%v)", tc.name, seq, d.Seq, err)
			}
		}
	}
}

func TestJSONHeadVersion(t *testing.T) {
	for _, k := range []Kind{KindResult, KindStatus, KindError} {
		want := `{"type":"` + k.String() + `","v":` + strconv.Itoa(Version) + `,"seq":`
		if jsonHead(k) != want {
			t.Errorf("head for %v is %q, want %q", k, jsonHead(k), want)
		}
	}
	if ckVersion != string(appendCBORHead(nil, cborUint, Version)) {
		t.Error("CBOR version constant differs from Version")
	}
}

// Floats are written with the fewest digits that read back as the same
// float32, in both encodings.
func TestFloatRoundTrip(t *testing.T) {
	vals := []float32{0, 1, -1, 0.1, 1.0 / 3, math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-45, 123456.79, -7.006492e-45, 16777217}
	for i := 0; i < 2000; i++ {
		vals = append(vals, math.Float32frombits(uint32(i)*2654435761))
	}
	for _, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			continue
		}
		s := appendJSONFloat32(nil, v)
		f, err := strconv.ParseFloat(string(s), 32)
		if err != nil || float32(f) != v {
			t.Fatalf("%v written as %s reads back as %v (%v)", v, s, f, err)
		}
		var back float32
		if err := json.Unmarshal(s, &back); err != nil || back != v {
			t.Fatalf("%v written as %s: encoding/json reads %v (%v)", v, s, back, err)
		}
		var cb float32
		if err := cbor.Unmarshal(appendCBORFloat32(nil, v), &cb); err != nil || cb != v {
			t.Fatalf("%v: CBOR reads %v (%v)", v, cb, err)
		}
	}
	for _, v := range []float64{0.1, 9.81, 52.520008, 1e300, -0.5, 1 << 60} {
		var cb float64
		if err := cbor.Unmarshal(appendCBORFloat64(nil, v), &cb); err != nil || cb != v {
			t.Fatalf("%v: CBOR reads %v (%v)", v, cb, err)
		}
	}
}

func TestJSONStringEscapes(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\x00\x1f\x7f", "\n\r\t", "é✓😀", "\u2028\u2029", "bad\xff\xfeutf8\xc3", "<>&"} {
		b := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, b, err)
		}
		if want := validUTF8(s); back != want {
			t.Fatalf("%q round-trips to %q, want %q", s, back, want)
		}
		var cb string
		if err := cbor.Unmarshal(appendCBORText(nil, s), &cb); err != nil || cb != validUTF8(s) {
			t.Fatalf("%q: CBOR text %q (%v)", s, cb, err)
		}
	}
}

// Summarising keeps every record under the limit and keeps the record
// decodable, with the loss marked.
func TestSummarise(t *testing.T) {
	r := &Record{Kind: KindResult, Pipeline: "p", Engine: EngineRef{Name: "e"},
		Outputs: []Output{
			{Name: "big", Kind: OutputRaw, Shape: []int64{1, 4096}, Data: make([]float32, 4096)},
			{Name: "top", Kind: OutputClasses, Classes: []Class{{Index: 1, Label: "x", Score: 0.5}}},
		}}
	for i := range r.Outputs[0].Data {
		r.Outputs[0].Data[i] = float32(i) / 7
	}
	var e Encoded
	level, ok := e.encode(r, true, true, 1024)
	if !ok || level != levelNoRaw {
		t.Fatalf("level %d ok %v, want raw summarised", level, ok)
	}
	for _, enc := range []Encoding{NDJSON, CBOR} {
		w := e.AppendWire(nil, enc, 1)
		if len(w) > 1024 {
			t.Fatalf("%v: %d bytes > limit", enc, len(w))
		}
		var d Decoded
		var err error
		if enc == CBOR {
			err = DecodeCBOR(w[4:], &d)
		} else {
			err = DecodeJSON(w, &d)
		}
		if err != nil {
			t.Fatal(err)
		}
		o := d.Outputs["big"]
		if !o.Truncated || len(o.Data) != 0 || !reflect.DeepEqual(o.Shape, []int64{1, 4096}) {
			t.Fatalf("%v: raw output %+v, want shape kept, data dropped, truncated", enc, o)
		}
		if len(d.Outputs["top"].Top) != 1 {
			t.Fatalf("%v: class output lost: %+v", enc, d.Outputs)
		}
	}
	// Too many detections for the limit: outputs dropped, record marked.
	r2 := benchRecord()
	level, ok = e.encode(r2, true, true, 380)
	if !ok || level != levelNoLists {
		t.Fatalf("level %d ok %v, want outputs dropped", level, ok)
	}
	var d Decoded
	if err := DecodeJSON(e.AppendWire(nil, NDJSON, 1), &d); err != nil || !d.Truncated || len(d.Outputs) != 0 || d.Sensors != nil {
		t.Fatalf("decoded %+v (%v), want truncated record without outputs", d, err)
	}
	if _, ok := e.encode(r2, true, false, 40); ok {
		t.Fatal("a 40-byte limit must be impossible to meet")
	}
}

func TestCOBS(t *testing.T) {
	cases := [][]byte{{}, {0}, {0, 0}, {1}, {1, 0, 2}, bytes.Repeat([]byte{7}, 253), bytes.Repeat([]byte{7}, 254),
		bytes.Repeat([]byte{7}, 255), bytes.Repeat([]byte{7}, 600), append(bytes.Repeat([]byte{7}, 254), 0)}
	for i := 0; i < 300; i++ {
		b := make([]byte, i)
		for j := range b {
			b[j] = byte(j*31 + i)
		}
		cases = append(cases, b)
	}
	for _, c := range cases {
		enc := appendCOBS(nil, c)
		if bytes.IndexByte(enc, 0) >= 0 {
			t.Fatalf("% x: encoding contains zero: % x", c, enc)
		}
		if len(enc) > cobsMaxLen(len(c)) {
			t.Fatalf("%d bytes stuffed to %d > bound %d", len(c), len(enc), cobsMaxLen(len(c)))
		}
		dec, err := decodeCOBS(append([]byte(nil), enc...))
		if err != nil || !bytes.Equal(dec, c) {
			t.Fatalf("% x -> % x -> % x (%v)", c, enc, dec, err)
		}
	}
	for _, bad := range [][]byte{{0}, {5, 1}, {2, 0}, {3, 1, 1, 0}} {
		if _, err := decodeCOBS(bad); err == nil {
			t.Errorf("% x decoded without error", bad)
		}
	}
}

// With TPostNs set, a sink measures the encoding and hand-off as it writes
// the latency object, the last of the record, and the stages add up to the
// total exactly.
func TestLatencyMeasuredAtEncode(t *testing.T) {
	defer func(c func() int64) { clock = c }(clock)
	clock = func() int64 { return 1_000_123_999 }
	r := &Record{Kind: KindResult, Pipeline: "p", TCaptureNs: 1_000_000_500, TPostNs: 1_000_100_900,
		Latency: Latency{Fill: 10, Queue: 20, Pre: 30, Infer: 40, Post: 0}}
	// stage ends in µs: capture 1000000, post end 1000100 → the pipeline's
	// stages sum to 100; encode runs to 1000123.
	r.Latency.Post = 100 - 10 - 20 - 30 - 40
	for _, enc := range []Encoding{NDJSON, CBOR} {
		var e Encoded
		if _, ok := e.encode(r, enc == NDJSON, enc == CBOR, 1<<20); !ok {
			t.Fatal("encode failed")
		}
		w := e.AppendWire(nil, enc, 1)
		var d Decoded
		var err error
		if enc == CBOR {
			err = DecodeCBOR(w[4:], &d)
		} else {
			err = DecodeJSON(w, &d)
		}
		if err != nil {
			t.Fatal(err)
		}
		l := d.LatencyUs
		if l == nil || l.Encode != 23 || l.Total != 123 {
			t.Fatalf("%v: latency %+v, want encode 23, total 123", enc, l)
		}
		if sum := l.Fill + l.Queue + l.Pre + l.Infer + l.Post + l.Encode; sum != l.Total {
			t.Errorf("%v: stages add up to %d, total %d", enc, sum, l.Total)
		}
	}
}
