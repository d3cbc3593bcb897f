package stream

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CRC is the standard CRC-32C documented in PROTOCOL.md.
func TestCRC32CCheckValue(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Fatalf("CRC-32C check value %#08x, want 0xe3069283", got)
	}
}

func TestDecoderGaps(t *testing.T) {
	var in []byte
	for _, seq := range []uint64{5, 6, 9, 10, 2, 3} {
		in = AppendNDJSON(in, result("p", seq), seq)
	}
	dec := NewDecoder(bytes.NewReader(in), DecoderOptions{Framing: FramingAuto, FromStart: true})
	want := []struct {
		missed    uint64
		restarted bool
	}{{4, false}, {0, false}, {2, false}, {0, false}, {0, true}, {0, false}}
	for i, w := range want {
		var m Message
		if err := dec.Next(&m); err != nil {
			t.Fatal(err)
		}
		if m.Missed != w.missed || m.Restarted != w.restarted {
			t.Fatalf("record %d (seq %d): missed %d restarted %v, want %d %v", i, m.Rec.Seq, m.Missed, m.Restarted, w.missed, w.restarted)
		}
	}
	var m Message
	if err := dec.Next(&m); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if st := dec.Stats(); st.Missed != 6 || st.Gaps != 2 || st.Restarts != 1 || st.Records != 6 {
		t.Fatalf("stats %+v", st)
	}
	// Joined mid-stream (serial, files): the first seq is not a gap.
	dec = NewDecoder(bytes.NewReader(in), DecoderOptions{Framing: FramingNDJSON})
	if err := dec.Next(&m); err != nil || m.Missed != 0 {
		t.Fatalf("first record mid-stream: missed %d (%v)", m.Missed, err)
	}
}

func TestDecoderAutoRejectsGarbage(t *testing.T) {
	in := append(AppendNDJSON(nil, result("p", 1), 1), "\n\nxyz"...)
	dec := NewDecoder(bytes.NewReader(in), DecoderOptions{})
	var m Message
	if err := dec.Next(&m); err != nil {
		t.Fatal(err)
	}
	if err := dec.Next(&m); !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "0x78") {
		t.Fatalf("garbage at a record boundary: %v", err)
	}
	// A length prefix beyond the limit is refused before anything is read.
	dec = NewDecoder(bytes.NewReader([]byte{0, 0x10, 0, 0, 1, 2}), DecoderOptions{MaxRecord: 1024})
	if err := dec.Next(&m); !errors.Is(err, ErrFrame) {
		t.Fatalf("oversized CBOR length: %v", err)
	}
}

// Long NDJSON lines are read whole (up to the limit) even though they
// exceed the read buffer; longer ones are skipped and counted.
func TestDecoderLongLines(t *testing.T) {
	big := &Record{Kind: KindResult, Pipeline: "p", Outputs: []Output{{Name: "t", Kind: OutputRaw, Shape: []int64{40000}, Data: make([]float32, 40000)}}}
	for i := range big.Outputs[0].Data {
		big.Outputs[0].Data[i] = float32(i) / 3
	}
	line := AppendNDJSON(nil, big, 1)
	if len(line) < 200<<10 {
		t.Fatalf("test line only %d bytes", len(line))
	}
	in := append(append(append([]byte(nil), line...), AppendNDJSON(nil, result("p", 2), 2)...), line...)
	dec := NewDecoder(bytes.NewReader(in), DecoderOptions{Framing: FramingNDJSON, MaxRecord: len(line)})
	var m Message
	if err := dec.Next(&m); err != nil || len(m.Rec.Outputs["t"].Data) != 40000 {
		t.Fatalf("long line: %v", err)
	}
	dec = NewDecoder(bytes.NewReader(in), DecoderOptions{Framing: FramingNDJSON, MaxRecord: 64 << 10})
	if err := dec.Next(&m); err != nil || m.Rec.Seq != 2 {
		t.Fatalf("after an over-long line: seq %d %v", m.Rec.Seq, err)
	}
	if err := dec.Next(&m); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if st := dec.Stats(); st.FrameErrors != 2 || st.Records != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The human-readable lines edged tail prints, checked against a golden file.
func TestAppendTextGolden(t *testing.T) {
	var out []byte
	for i, tc := range sampleRecords() {
		var m Message
		if err := DecodeJSON(AppendNDJSON(nil, &tc.rec, uint64(i+1)), &m.Rec); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			m.Missed = 3
		}
		line := AppendText(nil, &m)
		if bytes.ContainsAny(line, "\n\r") {
			t.Fatalf("%s: rendering spans lines: %q", tc.name, line)
		}
		out = append(append(out, line...), '\n')
	}
	path := filepath.Join("testdata", "golden", "tail.txt")
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestAppendTextGolden -update)", err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("tail lines differ:\n got:\n%s\nwant:\n%s", out, want)
	}
}

// CBOR the encoders never write (indefinite lengths, half floats, tags,
// byte strings, extreme negative integers) still reads as JSON, and CBOR
// with no JSON form falls back to re-encoding the decoded record.
func TestCBORAsJSON(t *testing.T) {
	cases := []struct{ cbor, json string }{
		{"\xbf\x61a\x9f\x01\x20\xff\x61b\x7f\x61x\x61y\xff\xff", `{"a":[1,-1],"b":"xy"}`},
		{"\xa3\x61h\xf9\x3c\x00\x61n\xf9\x7e\x00\x61s\xf9\x00\x01", `{"h":1,"n":null,"s":5.9604645e-08}`},
		{"\x82\xc1\x1a\x00\x00\x00\x01\x43\x01\x02\x03", `[1,"AQID"]`},
		{"\x83\x3b\xff\xff\xff\xff\xff\xff\xff\xff\xf4\xf7", `[-18446744073709551616,false,null]`},
		{"\xa1\x61k\xfb\x3f\xb9\x99\x99\x99\x99\x99\x9a", `{"k":0.1}`},
	}
	for _, c := range cases {
		got, rest, err := appendCBORJSON(nil, []byte(c.cbor), 0)
		if err != nil || len(rest) != 0 || string(got) != c.json {
			t.Errorf("% x: %s (rest %d, %v), want %s", c.cbor, got, len(rest), err, c.json)
		}
	}
	for _, bad := range []string{"\xa1\x01\x02", "\x9f\x01", "\x62a", "\x1c", "\xf8\x20"} {
		if _, _, err := appendCBORJSON(nil, []byte(bad), 0); err == nil {
			t.Errorf("% x: no error", bad)
		}
	}
	m := Message{Encoding: CBOR, Raw: []byte("\xa2\x64type\x66status\x01\x02"), Rec: Decoded{Type: "status", Seq: 3}}
	if got := string(m.JSON()); got != `{"type":"status","v":0,"seq":3}` {
		t.Errorf("fallback: %s", got)
	}
}
