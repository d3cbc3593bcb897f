package plan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

// mkPlan builds a plan header of n bytes (n >= 28) recording version v.
func mkPlan(n int, v [4]byte) []byte {
	b := make([]byte, n)
	copy(b, "ftrt")
	copy(b[24:], v[:])
	for i := HeaderSize; i < n; i++ {
		b[i] = byte(i)
	}
	return b
}

func wrap(meta string, p []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, int32(len(meta)))
	b.WriteString(meta)
	b.Write(p)
	return b.Bytes()
}

const ultralyticsMeta = `{"description": "Ultralytics YOLO11n model", "author": "Ultralytics", "date": "2025-01-01", ` +
	`"version": "8.3.0", "license": "AGPL-3.0", "stride": 32, "task": "detect", "batch": 1, "imgsz": [480, 640], ` +
	`"names": {"0": "person", "1": "bicycle", "2": "car"}, "args": {"batch": 1, "half": true}, "channels": 3}`

func TestParse(t *testing.T) {
	v103 := [4]byte{10, 3, 0, 26}
	good := mkPlan(64, v103)
	word1 := mkPlan(64, v103)
	binary.LittleEndian.PutUint32(word1[4:], 7)

	tests := []struct {
		name    string
		in      []byte
		want    string // substring of the error; "" means success
		off     int
		built   Version
		wrapped bool
	}{
		{name: "bare plan", in: good, built: Version{10, 3, 0, 26}},
		{name: "exactly header", in: mkPlan(28, [4]byte{8, 6, 1, 5}), built: Version{8, 6, 1, 5}},
		{name: "empty", in: nil, want: "file is empty"},
		{name: "three bytes", in: []byte("ftr"), want: "3 bytes, shorter than a 28-byte"},
		{name: "27 bytes", in: mkPlan(64, v103)[:27], want: "27 bytes, shorter than its 28-byte header"},
		{name: "wrong magic", in: append([]byte("abcd"), good[4:]...), want: `starts with "abcd\x00\x00\x00\x00"`},
		{name: "reversed magic", in: append([]byte("trtf"), good[4:]...), want: "wrong byte order"},
		{name: "git lfs pointer", in: []byte("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 10\n"), want: "git lfs pull"},
		{name: "zip", in: append([]byte("PK\x03\x04"), good...), want: "PyTorch"},
		{name: "onnx", in: append([]byte{0x08, 0x07, 0x12, 0x07}, []byte("pytorch onnx model bytes .....")...), want: "ONNX model"},
		{name: "word1 nonzero", in: word1, want: "header word 1 = 7"},
		{name: "wrapped", in: wrap(ultralyticsMeta, good), off: 4 + len(ultralyticsMeta), built: Version{10, 3, 0, 26}, wrapped: true},
		{name: "wrapped empty object", in: wrap(`{}`, good), off: 6, built: Version{10, 3, 0, 26}, wrapped: true},
		{name: "wrapped truncated metadata", in: wrap(ultralyticsMeta, good)[:40], want: "only 40 bytes long"},
		{name: "wrapped bad json", in: wrap(`{"names": [1,}`, good), want: "metadata is not valid"},
		{name: "wrapped bad names key", in: wrap(`{"names": {"x": "cat"}}`, good), want: `class index "x"`},
		{name: "wrapped bad imgsz", in: wrap(`{"imgsz": [640, -1]}`, good), want: "key imgsz"},
		{name: "wrapped bad stride", in: wrap(`{"stride": "big"}`, good), want: "key stride"},
		{name: "wrapped no plan", in: wrap(`{"task": "detect"}`, []byte("not a plan at all, just text....")), want: "not followed by a TensorRT plan"},
		{name: "wrapped short plan", in: wrap(`{"task": "detect"}`, good[:20]), want: "after 22 bytes of Ultralytics metadata is 20 bytes"},
		{name: "wrapped plan word1", in: wrap(`{}`, word1), want: "header word 1 = 7"},
		{name: "huge metadata length", in: append([]byte{0xff, 0xff, 0xff, 0x7f, '{'}, good...), want: "only 69 bytes long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.in)
			if tc.want != "" {
				if err == nil {
					t.Fatalf("Parse succeeded, want error containing %q", tc.want)
				}
				if !errors.Is(err, trt.ErrEngineInvalid) {
					t.Errorf("error %v does not wrap trt.ErrEngineInvalid", err)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q does not contain %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.Offset != tc.off {
				t.Errorf("Offset = %d, want %d", f.Offset, tc.off)
			}
			if f.Built != tc.built {
				t.Errorf("Built = %v, want %v", f.Built, tc.built)
			}
			if !bytes.Equal(f.Plan, tc.in[tc.off:]) {
				t.Errorf("Plan is not the input from offset %d", tc.off)
			}
			if (f.Metadata != nil) != tc.wrapped {
				t.Errorf("Metadata = %v, want wrapped=%v", f.Metadata, tc.wrapped)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	f, err := Parse(wrap(ultralyticsMeta, mkPlan(40, [4]byte{10, 3, 0, 26})))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata
	if md.Task != "detect" || md.Stride != 32 || md.Batch != 1 {
		t.Errorf("task/stride/batch = %q/%d/%d", md.Task, md.Stride, md.Batch)
	}
	if len(md.Imgsz) != 2 || md.Imgsz[0] != 480 || md.Imgsz[1] != 640 {
		t.Errorf("Imgsz = %v, want [480 640]", md.Imgsz)
	}
	if got := strings.Join(md.ClassNames(), ","); got != "person,bicycle,car" {
		t.Errorf("ClassNames = %q", got)
	}
	if md.Producer != "Ultralytics 8.3.0" || md.Channels != 3 || md.End2End || md.From != trt.FromEngineHeader {
		t.Errorf("producer %q channels %d end2end %v from %q", md.Producer, md.Channels, md.End2End, md.From)
	}
	if got := strings.Join(md.Keys, ","); got != "args,author,batch,channels,date,description,imgsz,license,names,stride,task,version" {
		t.Errorf("Keys = %s", got)
	}

	// Other accepted spellings.
	f, err = Parse(wrap(`{"names": ["a", "b"], "imgsz": 320, "stride": [8, 16, 32]}`, mkPlan(28, [4]byte{})))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Metadata.ClassNames(), ","); got != "a,b" {
		t.Errorf("list names = %q", got)
	}
	if f.Metadata.Imgsz[0] != 320 || f.Metadata.Imgsz[1] != 320 || f.Metadata.Stride != 32 {
		t.Errorf("imgsz %v stride %d", f.Metadata.Imgsz, f.Metadata.Stride)
	}

	// Gaps in class indices give no ordered list.
	f, err = Parse(wrap(`{"names": {"0": "a", "2": "c"}}`, mkPlan(28, [4]byte{})))
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata.ClassNames() != nil || f.Metadata.Names[2] != "c" {
		t.Errorf("gapped names: list %v map %v", f.Metadata.ClassNames(), f.Metadata.Names)
	}
}

func TestCompatible(t *testing.T) {
	tests := []struct {
		built, lib Version
		vc         bool
		ok         bool
	}{
		{Version{10, 3, 0, 26}, Version{10, 3, 0, 0}, false, true},
		{Version{10, 3, 1, 2}, Version{10, 3, 0, 0}, false, true}, // patch differences are TensorRT's call
		{Version{10, 3, 0, 26}, Version{10, 4, 0, 0}, false, false},
		{Version{10, 4, 0, 26}, Version{10, 3, 0, 0}, false, false},
		{Version{8, 6, 2, 3}, Version{10, 3, 0, 0}, false, false},
		{Version{8, 6, 2, 3}, Version{8, 6, 2, 0}, false, true},
		{Version{10, 3, 0, 26}, Version{8, 6, 2, 0}, false, false},
		{Version{99, 99, 0, 0}, Version{8, 5, 2, 0}, false, true}, // 8.5 plans carry no version: not checked
		{Version{10, 3, 0, 26}, Version{}, false, true},           // library unknown: not checked
		{Version{10, 3, 0, 26}, Version{10, 8, 0, 0}, true, true},
		{Version{10, 8, 0, 26}, Version{10, 3, 0, 0}, true, false},
		{Version{8, 6, 1, 5}, Version{10, 3, 0, 0}, true, true},
		{Version{8, 5, 2, 2}, Version{10, 3, 0, 0}, true, false},
		{Version{10, 16, 0, 1}, Version{11, 1, 0, 0}, true, true},
		{Version{10, 3, 0, 26}, Version{8, 6, 2, 0}, true, false},
	}
	for _, tc := range tests {
		f := &File{Built: tc.built}
		err := f.Compatible(Options{Library: tc.lib, VersionCompatible: tc.vc})
		if tc.ok != (err == nil) {
			t.Errorf("built %v lib %v vc=%v: err = %v, want ok=%v", tc.built, tc.lib, tc.vc, err, tc.ok)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, trt.ErrVersion) {
			t.Errorf("error does not wrap trt.ErrVersion: %v", err)
		}
		msg := err.Error()
		for _, want := range []string{tc.built.String(), tc.lib.String(), "trtexec"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %q", msg, want)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	p := mkPlan(64, [4]byte{10, 3, 0, 26})
	if _, err := Check(p, Options{Library: Version{10, 3, 0, 0}}); err != nil {
		t.Errorf("matching version: %v", err)
	}
	// A plan with patched version bytes (what the HIL test does to a real engine).
	p[24], p[25] = 9, 9
	_, err := Check(p, Options{Library: Version{10, 3, 0, 0}})
	if !errors.Is(err, trt.ErrVersion) || !strings.Contains(err.Error(), "9.9.0.26") {
		t.Errorf("patched version: %v", err)
	}
	if _, err := Check(p[:10], Options{Library: Version{10, 3, 0, 0}}); !errors.Is(err, trt.ErrEngineInvalid) {
		t.Errorf("truncated: %v", err)
	}
}

func TestVersionFromInt(t *testing.T) {
	tests := []struct {
		n    int
		want Version
	}{
		{8502, Version{8, 5, 2, 0}},
		{8601, Version{8, 6, 1, 0}},
		{100300, Version{10, 3, 0, 0}},
		{101600, Version{10, 16, 0, 0}},
		{110100, Version{11, 1, 0, 0}},
		{90300, Version{9, 3, 0, 0}},
		{0, Version{}},
		{-5, Version{}},
	}
	for _, tc := range tests {
		if got := VersionFromInt(tc.n); got != tc.want {
			t.Errorf("VersionFromInt(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	if s := (Version{10, 3, 0, 26}).String(); s != "10.3.0.26" {
		t.Errorf("String = %q", s)
	}
	if s := (Version{8, 5, 2, 0}).String(); s != "8.5.2" {
		t.Errorf("String = %q", s)
	}
}

func FuzzParse(f *testing.F) {
	good := mkPlan(40, [4]byte{10, 3, 0, 26})
	f.Add(good)
	f.Add(good[:28])
	f.Add(good[:27])
	f.Add([]byte{})
	f.Add(wrap(ultralyticsMeta, good))
	f.Add(wrap(`{"names": ["a"], "imgsz": 1}`, good))
	f.Add(wrap(`{"names": {"0": "a"}}`, good[:30]))
	f.Add([]byte("version https://git-lfs.github.com/spec/v1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := Parse(b)
		if err != nil {
			if !errors.Is(err, trt.ErrEngineInvalid) {
				t.Fatalf("error does not wrap ErrEngineInvalid: %v", err)
			}
			return
		}
		if len(fl.Plan) < HeaderSize || binary.LittleEndian.Uint32(fl.Plan) != Magic {
			t.Fatalf("accepted plan without a header: %q", fl.Plan)
		}
		if fl.Offset < 0 || fl.Offset+len(fl.Plan) != len(b) || !bytes.Equal(b[fl.Offset:], fl.Plan) {
			t.Fatalf("Plan is not the file's tail from offset %d", fl.Offset)
		}
		if (fl.Offset != 0) != (fl.Metadata != nil) {
			t.Fatalf("offset %d with metadata %v", fl.Offset, fl.Metadata)
		}
		if err := fl.Compatible(Options{Library: Version{10, 3, 0, 0}}); err != nil && !errors.Is(err, trt.ErrVersion) {
			t.Fatalf("Compatible error does not wrap ErrVersion: %v", err)
		}
	})
}

// TestSniff: what Sniff sees of a large file (its first bytes) refuses
// what is not a plan, and a file it sees whole gets Parse.
func TestSniff(t *testing.T) {
	v103 := [4]byte{10, 3, 0, 26}
	const size = 1 << 30 // a large file: only the head is looked at
	head := func(b []byte) []byte { return b[:min(len(b), 4096)] }
	good := mkPlan(8192, v103)
	word1 := mkPlan(8192, v103)
	binary.LittleEndian.PutUint32(word1[4:], 7)
	for _, tc := range []struct {
		name string
		head []byte
		size int64
		want string // "" means accepted
	}{
		{"bare plan", head(good), size, ""},
		{"wrapped plan", head(wrap(ultralyticsMeta, good)), size, ""},
		{"wrapped, plan past the head", head(wrap(`{"a": "`+strings.Repeat("x", 5000)+`"}`, good)), size, ""},
		{"zeros", make([]byte, 4096), size, "does not start with the TensorRT plan magic"},
		{"onnx", head(append([]byte{0x08, 0x07, 0x12, 0x07}, make([]byte, 5000)...)), size, "ONNX model"},
		{"word1", head(word1), size, "header word 1 = 7"},
		{"wrapped, not a plan after the metadata", head(wrap(`{"task": "detect"}`, make([]byte, 5000))), size, "not followed by a TensorRT plan"},
		{"wrapped, metadata past the end", head(wrap(`{"a": "`+strings.Repeat("x", 5000)+`"}`, good)), 5000, "truncated"},
		{"whole file: Parse", good[:20], 20, "shorter than its 28-byte header"},
		{"empty", nil, 0, "file is empty"},
	} {
		err := Sniff(tc.head, tc.size)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, trt.ErrEngineInvalid) || !strings.Contains(fmt.Sprint(err), tc.want)):
			t.Errorf("%s: %v, want ErrEngineInvalid with %q", tc.name, err, tc.want)
		}
	}
}
