package demomodel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

// A small protobuf reader, independent of the writer in proto.go, used to
// check the generated model's structure without ONNX Runtime.

type field struct {
	num  int
	wire int
	v    uint64 // varint or fixed32
	b    []byte // length-delimited
}

func decode(t testing.TB, b []byte) []field {
	t.Helper()
	var fs []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad tag varint at %x", b[:min(len(b), 8)])
		}
		b = b[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case 0:
			f.v, n = binary.Uvarint(b)
			if n <= 0 {
				t.Fatalf("field %d: bad varint", f.num)
			}
			b = b[n:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				t.Fatalf("field %d: bad length %d", f.num, l)
			}
			f.b, b = b[n:n+int(l)], b[n+int(l):]
		case 5:
			if len(b) < 4 {
				t.Fatalf("field %d: short fixed32", f.num)
			}
			f.v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		default:
			t.Fatalf("field %d: unexpected wire type %d", f.num, f.wire)
		}
		fs = append(fs, f)
	}
	return fs
}

func all(fs []field, num int) []field {
	var out []field
	for _, f := range fs {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

func one(t testing.TB, fs []field, num int) field {
	t.Helper()
	got := all(fs, num)
	if len(got) != 1 {
		t.Fatalf("field %d occurs %d times, want once", num, len(got))
	}
	return got[0]
}

// graphIO decodes a ValueInfoProto into a TensorSpec (float32 expected).
func graphIO(t testing.TB, b []byte) trt.TensorSpec {
	vi := decode(t, b)
	typ := decode(t, one(t, decode(t, one(t, vi, 2).b), 1).b) // TypeProto.tensor_type
	if et := one(t, typ, 1).v; et != 1 {
		t.Fatalf("elem_type %d, want FLOAT", et)
	}
	s := trt.TensorSpec{Name: string(one(t, vi, 1).b), Type: trt.Float32}
	for _, d := range all(decode(t, one(t, typ, 2).b), 1) {
		dim := decode(t, d.b)
		if p := all(dim, 2); len(p) == 1 {
			s.Shape = append(s.Shape, -1)
			continue
		}
		s.Shape = append(s.Shape, int64(one(t, dim, 1).v))
	}
	return s
}

type decoded struct {
	irVersion int
	opsets    map[string]int
	sig       trt.Signature
	ops       []string
	meta      map[string]string
}

// opset13 lists the ops the demo model may use and their opset-13 arity.
var opset13 = map[string][2]int{ // op: {inputs, outputs}
	"ReduceMin": {1, 1}, "ReduceSum": {2, 1}, "Greater": {2, 1}, "Cast": {1, 1},
	"Sub": {2, 1}, "Mul": {2, 1}, "Add": {2, 1}, "Div": {2, 1}, "MatMul": {2, 1},
	"Softmax": {1, 1}, "Concat": {2, 1},
	"Expand": {2, 1}, "ReduceMean": {1, 1}, // SlowLoad's constants
}

// inspect decodes a model and checks that its graph is well formed: every
// node's op is known with the right arity, every value is defined once
// before it is used, and every graph output is produced.
func inspect(t testing.TB, model []byte) decoded {
	t.Helper()
	m := decode(t, model)
	d := decoded{irVersion: int(one(t, m, 1).v), opsets: map[string]int{}, meta: map[string]string{}}
	for _, o := range all(m, 8) {
		of := decode(t, o.b)
		dom := ""
		if f := all(of, 1); len(f) == 1 {
			dom = string(f[0].b)
		}
		d.opsets[dom] = int(one(t, of, 2).v)
	}
	for _, p := range all(m, 14) {
		pf := decode(t, p.b)
		d.meta[string(one(t, pf, 1).b)] = string(one(t, pf, 2).b)
	}
	g := decode(t, one(t, m, 7).b)
	defined := map[string]bool{}
	for _, in := range all(g, 11) {
		s := graphIO(t, in.b)
		d.sig.Inputs = append(d.sig.Inputs, s)
		defined[s.Name] = true
	}
	for _, init := range all(g, 5) {
		tf := decode(t, init.b)
		name := string(one(t, tf, 8).b)
		n := int64(1)
		for _, dim := range all(tf, 1) {
			n *= int64(dim.v)
		}
		size := map[uint64]int64{1: 4, 7: 8}[one(t, tf, 2).v]
		if raw := one(t, tf, 9).b; int64(len(raw)) != n*size {
			t.Errorf("initializer %s: %d raw bytes for %d elements of size %d", name, len(raw), n, size)
		}
		if defined[name] {
			t.Errorf("initializer %s defined twice", name)
		}
		defined[name] = true
	}
	for _, nf := range all(g, 1) {
		n := decode(t, nf.b)
		op := string(one(t, n, 4).b)
		ins, outs := all(n, 1), all(n, 2)
		arity, ok := opset13[op]
		if !ok {
			t.Errorf("node op %s is not in the demo model's op list", op)
		} else if len(ins) != arity[0] || len(outs) != arity[1] {
			t.Errorf("node %s has %d inputs and %d outputs, want %v", op, len(ins), len(outs), arity)
		}
		for _, in := range ins {
			if !defined[string(in.b)] {
				t.Errorf("node %s uses %q before it is defined", op, in.b)
			}
		}
		for _, out := range outs {
			if defined[string(out.b)] {
				t.Errorf("node %s redefines %q", op, out.b)
			}
			defined[string(out.b)] = true
		}
		d.ops = append(d.ops, op)
	}
	for _, out := range all(g, 12) {
		s := graphIO(t, out.b)
		if !defined[s.Name] {
			t.Errorf("graph output %s is never produced", s.Name)
		}
		d.sig.Outputs = append(d.sig.Outputs, s)
	}
	return d
}

func TestDefaultIsBuild(t *testing.T) {
	b, err := Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, Default) {
		t.Fatal("demo.onnx differs from Build(Options{}); run `go generate ./trt/demomodel` and commit demo.onnx")
	}
	v0, err := Variant(0)
	if err != nil || !bytes.Equal(v0, Default) {
		t.Fatalf("Variant(0) differs from Default (err %v)", err)
	}
	if len(Default) > 1<<20 {
		t.Errorf("demo model is %d bytes, want < 1 MiB", len(Default))
	}
	f, err := os.ReadFile("demo.onnx")
	if err != nil || !bytes.Equal(f, Default) {
		t.Errorf("embedded Default differs from demo.onnx on disk (err %v)", err)
	}
}

func TestStructure(t *testing.T) {
	for _, o := range []Options{{}, {Permutation: 5}, {InputSize: 32}, {InputName: "pixels"}, {NaN: true}, {DynamicBatch: true}, {SlowLoad: 3}} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			b, err := Build(o)
			if err != nil {
				t.Fatal(err)
			}
			d := inspect(t, b)
			if d.irVersion != 7 {
				t.Errorf("ir_version %d, want 7", d.irVersion)
			}
			if len(d.opsets) != 1 || d.opsets[""] != 13 {
				t.Errorf("opset imports %v, want ai.onnx 13 only", d.opsets)
			}
			if err := d.sig.Check(o.Signature()); err != nil {
				t.Error(err)
			}
			if d.meta["edged.labels"] != strings.Join(Labels[:], ",") || d.meta["edged.variant"] != fmt.Sprint(o.Permutation) {
				t.Errorf("metadata %v", d.meta)
			}
			if len(d.ops) < 10 {
				t.Errorf("only %d nodes: %v", len(d.ops), d.ops)
			}
		})
	}
	want := trt.Signature{
		Inputs: []trt.TensorSpec{{Name: "image", Type: trt.Float32, Shape: []int64{1, 3, 64, 64}}},
		Outputs: []trt.TensorSpec{
			{Name: "class", Type: trt.Float32, Shape: []int64{1, 8}},
			{Name: "centroid", Type: trt.Float32, Shape: []int64{1, 2}},
		},
	}
	if err := inspect(t, Default).sig.Check(want); err != nil {
		t.Errorf("Default: %v", err)
	}
}

func TestDeterministicAndDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, o := range []Options{{}, {Permutation: 1}, {Permutation: 7}, {InputSize: 32}, {InputName: "x"}, {NaN: true}, {DynamicBatch: true}, {SlowLoad: 1}, {SlowLoad: 2}} {
		a, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Build(o)
		if !bytes.Equal(a, b) {
			t.Errorf("%+v: two builds differ", o)
		}
		if prev, ok := seen[string(a)]; ok {
			t.Errorf("%+v builds the same bytes as %s", o, prev)
		}
		seen[string(a)] = fmt.Sprintf("%+v", o)
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []Options{{Permutation: -1}, {Permutation: 8}, {InputSize: -3}, {InputSize: MaxSize + 1}, {InputName: "class"}, {InputName: "bg_mask"}, {InputName: "a\x00b"}, {InputName: "\xff"}, {SlowLoad: -1}, {SlowLoad: 1, InputName: "slow_1"}} {
		if _, err := Build(o); !errors.Is(err, ErrOptions) {
			t.Errorf("Build(%+v) = %v, want ErrOptions", o, err)
		}
	}
	if _, err := Variant(9); err == nil || !strings.Contains(err.Error(), "variant 9") {
		t.Errorf("Variant(9) = %v", err)
	}
}

func TestExpected(t *testing.T) {
	for bg := range Classes {
		if got := Expected(bg, 0); got != bg {
			t.Errorf("Expected(%d, 0) = %d", bg, got)
		}
		if got := Expected(bg, 3); got != (bg+3)%8 {
			t.Errorf("Expected(%d, 3) = %d", bg, got)
		}
	}
	if Expected(7, 1) != 0 || Expected(0, 7) != 7 {
		t.Error("Expected does not wrap modulo 8")
	}
}

// TestReference checks the model's arithmetic (as the Go reference follows
// it) on rendered scenes: class and centroid come out right for every
// background, variant and a range of square positions.
func TestReference(t *testing.T) {
	for _, size := range []int{64, 32} {
		img := make([]float32, 3*size*size)
		for variant := range Classes {
			o := Options{Permutation: variant, InputSize: size}
			for bg := range Classes {
				for _, q := range []Square{{0, 0, 4}, {size / 3, size / 2, 7}, {size - 9, size - 9, 9}, {5, size - 1, 1}} {
					if err := Render(img, size, bg, q); err != nil {
						t.Fatal(err)
					}
					class, cen, err := Reference(o, img)
					if err != nil {
						t.Fatal(err)
					}
					if got := Argmax(class[:]); got != Expected(bg, variant) {
						t.Errorf("size %d variant %d bg %d square %v: class %d %v", size, variant, bg, q, got, class)
					}
					var sum float32
					for _, c := range class {
						sum += c
					}
					if math.Abs(float64(sum-1)) > 1e-5 {
						t.Errorf("class probabilities sum to %v", sum)
					}
					wx, wy := q.Centre(size)
					if math.Abs(float64(cen[0]-wx)) > 1e-5 || math.Abs(float64(cen[1]-wy)) > 1e-5 {
						t.Errorf("size %d square %v: centroid %v, want (%v, %v)", size, q, cen, wx, wy)
					}
				}
			}
		}
	}
	class, _, err := Reference(Options{NaN: true}, make([]float32, 3*64*64))
	if err != nil || !math.IsNaN(float64(class[0])) || Argmax(class[:]) != -1 {
		t.Errorf("NaN variant reference: %v, %v", class, err)
	}
}

func TestRenderErrors(t *testing.T) {
	if err := Render(make([]float32, 10), 64, 0, Square{}); err == nil {
		t.Error("Render into a short slice succeeded")
	}
	if err := Render(make([]float32, 3*16), 4, 8, Square{}); err == nil {
		t.Error("Render with background 8 succeeded")
	}
	if _, _, err := Reference(Options{}, make([]float32, 100)); err == nil {
		t.Error("Reference on a short slice succeeded")
	}
}

// FuzzBuild: any options either fail validation or build a well-formed
// model with the signature Options.Signature promises.
func FuzzBuild(f *testing.F) {
	f.Add(0, 0, "", false, false)
	f.Add(3, 32, "pixels", true, false)
	f.Add(7, 1, "x", false, true)
	f.Add(8, -1, "class", false, false)
	f.Fuzz(func(t *testing.T, perm, size int, name string, nan, dyn bool) {
		if size > 256 {
			size %= 256 // keep each build small
		}
		o := Options{Permutation: perm, InputSize: size, InputName: name, NaN: nan, DynamicBatch: dyn}
		b, err := Build(o)
		if err != nil {
			if !errors.Is(err, ErrOptions) {
				t.Fatalf("Build(%+v) = %v, not ErrOptions", o, err)
			}
			return
		}
		if err := inspect(t, b).sig.Check(o.Signature()); err != nil {
			t.Fatal(err)
		}
	})
}
