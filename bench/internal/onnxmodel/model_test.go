package onnxmodel

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// The ONNX field numbers the test reads (onnx/onnx.proto), written out
// here rather than taken from the writer, so a wrong number there fails.
const (
	modelGraph       = 7
	graphNode        = 1
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12
	nodeInput        = 1
	nodeOutput       = 2
	nodeOpType       = 4
	tensorDims       = 1
	tensorName       = 8
	tensorRawData    = 9
	valueName        = 1
	valueType        = 2
	typeTensorType   = 1
	tensorShape      = 2
	shapeDim         = 1
	dimValue         = 1
)

type field struct {
	num int
	v   uint64
	b   []byte
}

// fields decodes one protobuf message (varint and length-delimited only).
func fields(t *testing.T, b []byte) []field {
	t.Helper()
	var out []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatal("bad tag")
		}
		b = b[n:]
		f := field{num: int(key >> 3)}
		switch key & 7 {
		case 0:
			f.v, n = binary.Uvarint(b)
			if n <= 0 {
				t.Fatal("bad varint")
			}
			b = b[n:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				t.Fatal("bad length")
			}
			f.b, b = b[n:n+int(l)], b[n+int(l):]
		default:
			t.Fatalf("wire type %d", key&7)
		}
		out = append(out, f)
	}
	return out
}

func get(fs []field, num int) []field {
	var out []field
	for _, f := range fs {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

func TestBuild(t *testing.T) {
	m, err := Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := fields(t, get(fields(t, m), modelGraph)[0].b)
	var ops []string
	defined := map[string]bool{InputName: true}
	for _, init := range get(g, graphInitializer) {
		tf := fields(t, init.b)
		n := uint64(1)
		for _, d := range get(tf, tensorDims) {
			n *= d.v
		}
		if raw := get(tf, tensorRawData)[0].b; uint64(len(raw)) != 4*n {
			t.Errorf("initializer %s: %d bytes for %d floats", get(tf, tensorName)[0].b, len(raw), n)
		}
		defined[string(get(tf, tensorName)[0].b)] = true
	}
	for _, nd := range get(g, graphNode) {
		nf := fields(t, nd.b)
		for _, in := range get(nf, nodeInput) {
			if !defined[string(in.b)] {
				t.Errorf("node input %s used before it is defined", in.b)
			}
		}
		defined[string(get(nf, nodeOutput)[0].b)] = true
		ops = append(ops, string(get(nf, nodeOpType)[0].b))
	}
	want := "Conv Relu Conv Relu GlobalAveragePool Flatten Gemm Softmax"
	if got := strings.Join(ops, " "); got != want {
		t.Errorf("ops %q, want %q", got, want)
	}
	if !defined[OutputName] {
		t.Errorf("output %s is not produced", OutputName)
	}
	dims := func(vi []byte) (name string, d []uint64) {
		f := fields(t, vi)
		tt := fields(t, get(fields(t, get(f, valueType)[0].b), typeTensorType)[0].b)
		for _, dim := range get(fields(t, get(tt, tensorShape)[0].b), shapeDim) {
			d = append(d, get(fields(t, dim.b), dimValue)[0].v)
		}
		return string(get(f, valueName)[0].b), d
	}
	if n, d := dims(get(g, graphInput)[0].b); n != InputName || len(d) != 4 || d[1] != 3 || d[2] != Size || d[3] != Size {
		t.Errorf("input %s %v", n, d)
	}
	if n, d := dims(get(g, graphOutput)[0].b); n != OutputName || len(d) != 2 || d[1] != Classes {
		t.Errorf("output %s %v", n, d)
	}

	again, _ := Build(Options{Seed: 1})
	other, _ := Build(Options{Seed: 2})
	if !bytes.Equal(m, again) || bytes.Equal(m, other) {
		t.Error("the model must depend on the seed, and only on it")
	}
	if _, err := Build(Options{Size: 5000}); err == nil {
		t.Error("size 5000 accepted")
	}
}
