package onnx_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/trt/onnx"
)

// sniff runs Sniff the way the Reloader does: on the first
// trt.SniffBytes bytes of a file of len(b) bytes.
func sniff(b []byte) error {
	return (&onnx.Backend{}).Sniff(b[:min(len(b), trt.SniffBytes)], int64(len(b)))
}

// TestSniff: the models edged ships pass; junk, zeros, other formats and
// truncated models are refused from their first bytes.
func TestSniff(t *testing.T) {
	for v := range 4 {
		m, err := demomodel.Variant(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := sniff(m); err != nil {
			t.Errorf("demo variant %d refused: %v", v, err)
		}
		for _, n := range []int{1, 2, 10, len(m) / 2, len(m) - 1} {
			if err := sniff(m[:n]); !errors.Is(err, trt.ErrEngineInvalid) {
				t.Errorf("demo variant %d cut to %d of %d bytes: %v, want ErrEngineInvalid", v, n, len(m), err)
			}
		}
	}
	// A large model: ir_version, then a graph of 1 MiB, most of it past
	// the bytes sniffed; cut short, its graph runs past the end.
	graph := binary.AppendUvarint([]byte{0x08, 0x08, 0x3a}, 1<<20)
	large := append(graph, bytes.Repeat([]byte{0x0a, 0x00}, 1<<19)...)
	if err := sniff(large); err != nil {
		t.Errorf("large model refused: %v", err)
	}
	if err := sniff(large[:len(large)-1]); !errors.Is(err, trt.ErrEngineInvalid) {
		t.Errorf("large model cut short by one byte: %v, want ErrEngineInvalid", err)
	}
	ort := append([]byte{0x14, 0, 0, 0}, []byte("ORTM....")...)
	if err := sniff(ort); err != nil {
		t.Errorf("ORT format model refused: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 3*trt.SniffBytes)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"zeros", make([]byte, 1<<20)},
		{"text", []byte("junk\n")},
		{"ELF", []byte("\x7fELF\x02\x01\x01\x00 and more")},
		{"zip", []byte("PK\x03\x04 a pytorch checkpoint")},
		{"git lfs", []byte("version https://git-lfs.github.com/spec/v1\noid sha256:0\n")},
		{"tensorrt plan", append([]byte("ftrt"), make([]byte, 100)...)},
		{"random", random},
	} {
		if err := sniff(c.b); !errors.Is(err, trt.ErrEngineInvalid) {
			t.Errorf("%s: %v, want ErrEngineInvalid", c.name, err)
		}
	}
	// Random files of every start byte: none passes.
	passed := 0
	for range 2000 {
		b := make([]byte, 4096)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if sniff(b) == nil {
			passed++
		}
	}
	if passed > 0 {
		t.Errorf("%d of 2000 random 4 KiB files pass as ONNX", passed)
	}
}
