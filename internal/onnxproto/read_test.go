package onnxproto

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// TestReadIO: the graph inputs (less initializers) and outputs of a model
// this package writes come back as written, dynamic dimensions with their
// names, whatever lies between them (nodes, weights).
func TestReadIO(t *testing.T) {
	weights := Tensor{Name: "w", Dims: []int64{1 << 16}, Floats: make([]float32, 1<<16)}
	g := Msg(nil).Bytes(GraphNode, Node{Op: "Add", Name: "add", Inputs: []string{"image", "w"}, Outputs: []string{"sum"}}.Encode()).
		Bytes(GraphInitializer, weights.Encode()).
		Bytes(GraphInput, ShapedValueInfo("image", DTFloat, []int64{1, 3, -1, -1}, []string{"", "", "height", "width"})).
		Bytes(GraphInput, ShapedValueInfo("w", DTFloat, []int64{1 << 16}, nil)). // an initializer listed as an input (IR < 4)
		Bytes(GraphOutput, ShapedValueInfo("sum", DTFloat16, []int64{-1, 2147483648}, nil))
	m := Msg(nil).Varint(ModelIRVersion, 8).Str(ModelProducerName, "test").Bytes(ModelGraph, g)
	io, err := ReadIO(bytes.NewReader(m), int64(len(m)))
	if err != nil {
		t.Fatal(err)
	}
	want := IO{
		Inputs:  []Value{{Name: "image", Elem: DTFloat, Dims: []int64{1, 3, -1, -1}, Params: []string{"", "", "height", "width"}}},
		Outputs: []Value{{Name: "sum", Elem: DTFloat16, Dims: []int64{-1, 2147483648}, Params: []string{"", ""}}},
	}
	if !reflect.DeepEqual(io, want) {
		t.Errorf("ReadIO = %+v, want %+v", io, want)
	}
	id := IdentityModel(DTUint8, []int64{1, -1, 3}, []string{"", "n"})
	if io, err := ReadIO(bytes.NewReader(id), int64(len(id))); err != nil || len(io.Inputs) != 1 || io.Outputs[0].Params[1] != "n" {
		t.Errorf("IdentityModel: %+v, %v", io, err)
	}
	for _, bad := range [][]byte{nil, []byte("junk"), m[:len(m)-5], Msg(nil).Varint(ModelIRVersion, 8)} {
		if _, err := ReadIO(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrFormat) {
			t.Errorf("ReadIO(%q...) = %v, want ErrFormat", bad[:min(len(bad), 8)], err)
		}
	}
}

// FuzzReadIO: ReadIO never panics, and what it returns is within its
// limits, whatever the bytes.
func FuzzReadIO(f *testing.F) {
	f.Add([]byte(IdentityModel(DTFloat, []int64{1, 3, -1, -1}, []string{"", "", "h", "w"})))
	f.Add([]byte(ConstModel("image", 64, 64, []ConstOutput{{Name: "boxes", Type: DTFloat, Dims: []int64{1, 4}, Values: []float32{1, 2, 3, 4}}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		io, err := ReadIO(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		for _, v := range append(io.Inputs, io.Outputs...) {
			if len(v.Dims) > maxDims || len(v.Dims) != len(v.Params) {
				t.Fatalf("value %+v", v)
			}
			for _, d := range v.Dims {
				if d < -1 {
					t.Fatalf("dimension %d", d)
				}
			}
		}
	})
}
