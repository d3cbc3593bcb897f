package postprocess

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// toHalf converts f to IEEE half precision, rounding to nearest even
// (normal range only: the test values are).
func toHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	if b&0x7fffffff == 0 {
		return sign
	}
	if exp <= 0 || exp >= 0x1f {
		panic("toHalf: out of the normal range")
	}
	h := uint32(sign) | uint32(exp)<<10 | mant>>13
	if r := mant & 0x1fff; r > 0x1000 || r == 0x1000 && h&1 == 1 {
		h++
	}
	return uint16(h)
}

// tensor makes a host tensor of type d and shape holding v (converted).
func tensor(t testing.TB, name string, d trt.DataType, shape []int64, v []float32) *trt.Tensor {
	t.Helper()
	spec := trt.TensorSpec{Name: name, Type: d, Shape: shape}
	if int(spec.Elements()) != len(v) {
		t.Fatalf("tensor %s: %d values for %d elements", spec, len(v), spec.Elements())
	}
	buf, err := umem.NewHost().Alloc(max(int(spec.Bytes()), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Release() })
	b, _ := buf.Host()
	le := binary.LittleEndian
	for i, x := range v {
		switch d {
		case trt.Float32:
			le.PutUint32(b[4*i:], math.Float32bits(x))
		case trt.Float16:
			le.PutUint16(b[2*i:], toHalf(x))
		case trt.Int32:
			le.PutUint32(b[4*i:], uint32(int32(x)))
		case trt.Int64:
			le.PutUint64(b[8*i:], uint64(int64(x)))
		case trt.Int8:
			b[i] = byte(int8(x))
		case trt.Uint8, trt.Bool:
			b[i] = byte(x)
		}
	}
	return &trt.Tensor{TensorSpec: spec, Buf: buf}
}

func specs(ts ...*trt.Tensor) []trt.TensorSpec {
	out := make([]trt.TensorSpec, len(ts))
	for i, t := range ts {
		out[i] = t.TensorSpec
	}
	return out
}

func mustNew(t testing.TB, o Options, ts ...*trt.Tensor) *Processor {
	t.Helper()
	p, err := New(specs(ts...), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRawCapsAndFlags(t *testing.T) {
	x := tensor(t, "x", trt.Float32, []int64{1, 6}, []float32{1, 2, 3, 4, 5, 6})
	p := mustNew(t, Options{Kind: Raw, MaxValues: 4}, x)
	var out stream.Output
	p.Run([]*trt.Tensor{x}, nil, &out)
	if out.Kind != stream.OutputRaw || len(out.Data) != 4 || !out.Truncated || out.Data[3] != 4 || out.DType != "" {
		t.Fatalf("%+v", out)
	}
	y := tensor(t, "y", trt.Float32, []int64{1, 3}, []float32{9, 8, 7})
	q := mustNew(t, Options{Kind: Raw, MaxValues: 4}, y)
	q.Run([]*trt.Tensor{y}, nil, &out) // shorter than the cap
	if len(out.Data) != 3 || out.Truncated || out.Data[0] != 9 {
		t.Fatalf("%+v", out)
	}
}

// TestRawEveryType: every element type edged's backends give is sent raw
// with its values and its type named, without allocating.
func TestRawEveryType(t *testing.T) {
	v := []float32{0, 1, 2, 100, 7, 1}
	for _, d := range []trt.DataType{trt.Float16, trt.Int8, trt.Uint8, trt.Int32, trt.Int64, trt.Bool} {
		want := v
		if d == trt.Bool {
			want = []float32{0, 1, 1, 1, 1, 1}
		}
		in := v
		if d == trt.Bool {
			in = []float32{0, 1, 2, 100, 7, 1}
		}
		x := tensor(t, "x", d, []int64{2, 3}, in)
		p := mustNew(t, Options{Kind: Raw}, x)
		var out stream.Output
		p.Run([]*trt.Tensor{x}, nil, &out)
		if out.DType != d.String() || len(out.Data) != 6 {
			t.Fatalf("%s: %+v", d, out)
		}
		for i := range want {
			if out.Data[i] != want[i] {
				t.Errorf("%s: value %d = %v, want %v", d, i, out.Data[i], want[i])
			}
		}
		if n := testing.AllocsPerRun(20, func() { p.Run([]*trt.Tensor{x}, nil, &out) }); n != 0 {
			t.Errorf("%s: %v allocations", d, n)
		}
	}
}

func TestTopK(t *testing.T) {
	labels := []string{"a", "b", "c", "d"}
	x := tensor(t, "cls", trt.Float32, []int64{1, 4}, []float32{0.1, 0.6, float32(math.NaN()), 0.3})
	p := mustNew(t, Options{Kind: TopK, K: 2, Labels: labels}, x)
	var out stream.Output
	p.Run([]*trt.Tensor{x}, nil, &out)
	if len(out.Classes) != 2 || out.Classes[0].Index != 1 || out.Classes[0].Label != "b" || out.Classes[1].Index != 3 {
		t.Fatalf("%+v", out.Classes)
	}
	// float16 logits through softmax.
	h := tensor(t, "cls", trt.Float16, []int64{1, 3}, []float32{0, 0, 2})
	ps := mustNew(t, Options{Kind: TopK, K: 1, Softmax: true}, h)
	ps.Run([]*trt.Tensor{h}, nil, &out)
	want := float32(math.Exp(2) / (2 + math.Exp(2)))
	if out.Classes[0].Index != 2 || math.Abs(float64(out.Classes[0].Score-want)) > 1e-6 {
		t.Fatalf("softmax: %+v want %v", out.Classes, want)
	}
	if _, err := New(specs(x), Options{Kind: TopK, Labels: labels[:3]}); err == nil {
		t.Error("label count mismatch accepted")
	}
}

type halve struct{}

func (halve) ToSource(x, y float32) (float32, float32) { return x * 2, y * 2 }

// yolov8Boxes are four boxes of 2 classes: the first two overlap in class
// 0 (NMS keeps the better), the third is at the same place in class 1,
// the fourth is below the threshold.
var yolov8Boxes = [8][6]float32{
	{50, 50, 20, 20, 0.9, 0.1},
	{52, 51, 20, 20, 0.8, 0.05},
	{52, 51, 20, 20, 0.1, 0.7},
	{10, 10, 4, 4, 0.2, 0.1},
}

// transpose lays rows out attribute-major ([1, attrs, boxes]).
func transpose(rows [][]float32) []float32 {
	n, a := len(rows), len(rows[0])
	v := make([]float32, n*a)
	for b, row := range rows {
		for i, x := range row {
			v[i*n+b] = x
		}
	}
	return v
}

func rowsOf(a [][6]float32) [][]float32 {
	out := make([][]float32, len(a))
	for i := range a {
		out[i] = a[i][:]
	}
	return out
}

func flat(rows [][]float32) []float32 {
	var v []float32
	for _, r := range rows {
		v = append(v, r...)
	}
	return v
}

func checkYOLOv8(t *testing.T, out stream.Output) {
	t.Helper()
	if len(out.Detections) != 2 {
		t.Fatalf("%+v", out.Detections)
	}
	d := out.Detections[0]
	if d.Class != 0 || d.Label != "cat" || d.Box != [4]float32{80, 80, 120, 120} || math.Abs(float64(d.Score-0.9)) > 1e-3 {
		t.Fatalf("first %+v", d)
	}
	if out.Detections[1].Class != 1 || out.Detections[1].Label != "dog" {
		t.Fatalf("second %+v", out.Detections[1])
	}
}

func TestDetectionsYOLOv8(t *testing.T) {
	opts := Options{Kind: Detections, ScoreThreshold: 0.25, IOUThreshold: 0.45, MaxDetections: 10, Labels: []string{"cat", "dog"}}
	rows := rowsOf(yolov8Boxes[:])
	for _, d := range []trt.DataType{trt.Float32, trt.Float16} {
		// [1, 4+2, 8]: boxes as columns (more boxes than attributes is
		// how the layout is told apart), and the same as rows.
		tr := tensor(t, "det", d, []int64{1, 6, 8}, transpose(rows))
		rw := tensor(t, "det", d, []int64{1, 8, 6}, flat(rows))
		for _, x := range []*trt.Tensor{tr, rw} {
			p := mustNew(t, opts, x)
			var out stream.Output
			p.Run([]*trt.Tensor{x}, halve{}, &out)
			checkYOLOv8(t, out)
			if n := testing.AllocsPerRun(50, func() { p.Run([]*trt.Tensor{x}, halve{}, &out) }); n != 0 {
				t.Fatalf("%s %v: %v allocations", d, x.Shape, n)
			}
		}
	}
}

func TestDetectionsYOLOv5(t *testing.T) {
	// cx, cy, w, h, objectness, 2 class scores: score = objectness × class.
	rows := [][]float32{
		{50, 50, 20, 20, 0.5, 0.9, 0.1}, // 0.45, class 0
		{52, 51, 20, 20, 0.9, 0.1, 0.9}, // 0.81, class 1
		{10, 10, 4, 4, 0.2, 0.9, 0.1},   // 0.18: below
		{0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0},
	}
	x := tensor(t, "out", trt.Float32, []int64{1, 8, 7}, flat(rows))
	p := mustNew(t, Options{Kind: Detections, Format: FormatYOLOv5, ScoreThreshold: 0.25, IOUThreshold: 0.45, MaxDetections: 10}, x)
	var out stream.Output
	p.Run([]*trt.Tensor{x}, nil, &out)
	if len(out.Detections) != 2 || out.Detections[0].Class != 1 || math.Abs(float64(out.Detections[0].Score-0.81)) > 1e-6 ||
		out.Detections[1].Class != 0 || out.Detections[1].Box != [4]float32{40, 40, 60, 60} {
		t.Fatalf("%+v", out.Detections)
	}
}

func TestDetectionsEnd2End(t *testing.T) {
	// x1, y1, x2, y2, score, class; padding rows score 0. Overlapping
	// boxes of one class are both kept: the model did its own NMS.
	rows := [][]float32{
		{10, 20, 30, 40, 0.9, 3},
		{11, 21, 31, 41, 0.8, 3},
		{0, 0, 5, 5, 0.1, 1},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0},
	}
	x := tensor(t, "output0", trt.Float16, []int64{1, 7, 6}, flat(rows))
	p := mustNew(t, Options{Kind: Detections, Format: FormatEnd2End, ScoreThreshold: 0.25, IOUThreshold: 0.45, MaxDetections: 10}, x)
	var out stream.Output
	p.Run([]*trt.Tensor{x}, halve{}, &out)
	if len(out.Detections) != 2 || out.Detections[0].Box != [4]float32{20, 40, 60, 80} || out.Detections[1].Class != 3 {
		t.Fatalf("%+v", out.Detections)
	}
	if n := testing.AllocsPerRun(50, func() { p.Run([]*trt.Tensor{x}, halve{}, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func efficientNMSTensors(t testing.TB, n int) []*trt.Tensor {
	return []*trt.Tensor{
		tensor(t, "num_dets", trt.Int32, []int64{1, 1}, []float32{float32(n)}),
		tensor(t, "det_boxes", trt.Float32, []int64{1, 4, 4}, []float32{10, 20, 30, 40, 11, 21, 31, 41, 1, 2, 3, 4, 0, 0, 0, 0}),
		tensor(t, "det_scores", trt.Float16, []int64{1, 4}, []float32{0.9, 0.75, 0.5, 0}),
		tensor(t, "det_classes", trt.Int32, []int64{1, 4}, []float32{2, 2, 0, 0}),
	}
}

func TestDetectionsEfficientNMS(t *testing.T) {
	ts := efficientNMSTensors(t, 3)
	p := mustNew(t, Options{Kind: Detections, Format: FormatEfficientNMS, ScoreThreshold: 0.6, MaxDetections: 10, Labels: []string{"a", "b", "car"}}, ts...)
	var out stream.Output
	p.Run(ts, nil, &out)
	// The third is below the threshold; the fourth is past num_dets.
	if len(out.Detections) != 2 || out.Detections[0].Box != [4]float32{10, 20, 30, 40} || out.Detections[1].Label != "car" ||
		math.Abs(float64(out.Detections[1].Score-0.75)) > 1e-3 {
		t.Fatalf("%+v", out.Detections)
	}
	if p.Name() != "num_dets" || len(p.Inputs()) != 4 {
		t.Errorf("name %q inputs %v", p.Name(), p.Inputs())
	}
	if n := testing.AllocsPerRun(50, func() { p.Run(ts, nil, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	// num_dets beyond the boxes there are, or negative, does not read past them.
	for _, n := range []int{99, -1} {
		bad := efficientNMSTensors(t, n)
		p.Run(bad, nil, &out)
		if n < 0 && len(out.Detections) != 0 || n > 0 && len(out.Detections) != 2 {
			t.Errorf("num_dets %d: %+v", n, out.Detections)
		}
	}
}

func TestDetectionsRTDETR(t *testing.T) {
	// Normalised cx, cy, w, h of a 640x480 input, then 2 class scores.
	rows := [][]float32{
		{0.5, 0.5, 0.25, 0.5, 0.1, 0.8},
		{0.5, 0.5, 0.25, 0.5, 0.7, 0.1}, // same place, other class: kept
		{0.1, 0.1, 0.1, 0.1, 0.2, 0.1},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0},
	}
	x := tensor(t, "output0", trt.Float32, []int64{1, 7, 6}, flat(rows))
	o := Options{Kind: Detections, Format: FormatRTDETR, ScoreThreshold: 0.5, MaxDetections: 10, InputW: 640, InputH: 480}
	p := mustNew(t, o, x)
	var out stream.Output
	p.Run([]*trt.Tensor{x}, nil, &out)
	if len(out.Detections) != 2 || out.Detections[0].Box != [4]float32{240, 120, 400, 360} || out.Detections[0].Class != 1 {
		t.Fatalf("%+v", out.Detections)
	}
	// Two outputs, logits: the logistic function first.
	var boxes, logits []float32
	for _, r := range rows {
		boxes = append(boxes, r[:4]...)
		for _, s := range r[4:] {
			logits = append(logits, float32(math.Log(float64(s)/(1-float64(s))+1e-30)))
		}
	}
	b := tensor(t, "pred_boxes", trt.Float32, []int64{1, 7, 4}, boxes)
	l := tensor(t, "pred_logits", trt.Float32, []int64{1, 7, 2}, logits)
	o.Sigmoid = true
	q := mustNew(t, o, b, l)
	q.Run([]*trt.Tensor{b, l}, nil, &out)
	if len(out.Detections) != 2 || out.Detections[0].Box != [4]float32{240, 120, 400, 360} || math.Abs(float64(out.Detections[0].Score-0.8)) > 1e-5 {
		t.Fatalf("two outputs: %+v", out.Detections)
	}
	if n := testing.AllocsPerRun(50, func() { q.Run([]*trt.Tensor{b, l}, nil, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestKeypoints(t *testing.T) {
	// YOLOv8-pose: [1, 4+1+2×3, N] transposed; 2 keypoints of x, y, score.
	rows := [][]float32{
		{50, 50, 20, 20, 0.9, 45, 46, 0.8, 55, 56, 0.3},
		{51, 50, 20, 20, 0.7, 0, 0, 0, 0, 0, 0}, // suppressed by the first
		{20, 20, 10, 10, 0.6, 18, 19, 0.9, 22, 23, 0.9},
	}
	for len(rows) < 12 {
		rows = append(rows, make([]float32, 11))
	}
	x := tensor(t, "output0", trt.Float32, []int64{1, 11, 12}, transpose(rows))
	p := mustNew(t, Options{Kind: Keypoints, ScoreThreshold: 0.25, IOUThreshold: 0.45, MaxDetections: 10, KeypointCount: 2, KeypointDims: 3}, x)
	var out stream.Output
	p.Run([]*trt.Tensor{x}, halve{}, &out)
	if len(out.Detections) != 2 || out.KeypointDims != 3 {
		t.Fatalf("%+v", out)
	}
	if kp := out.Detections[0].Keypoints; len(kp) != 6 || kp[0] != 90 || kp[1] != 92 || kp[2] != 0.8 || kp[3] != 110 || kp[5] != 0.3 {
		t.Fatalf("keypoints %v", kp)
	}
	if kp := out.Detections[1].Keypoints; len(kp) != 6 || kp[0] != 36 || kp[4] != 46 {
		t.Fatalf("keypoints %v", kp)
	}
	if n := testing.AllocsPerRun(50, func() { p.Run([]*trt.Tensor{x}, halve{}, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	// End-to-end pose: x1, y1, x2, y2, score, class, then keypoints; the
	// count comes from the shape (x, y, score when it divides by 3).
	e2e := tensor(t, "output0", trt.Float32, []int64{1, 2, 12}, []float32{
		10, 10, 20, 20, 0.9, 0, 11, 12, 0.5, 13, 14, 0.6,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	})
	q := mustNew(t, Options{Kind: Keypoints, Format: FormatEnd2End, ScoreThreshold: 0.25, MaxDetections: 10}, e2e)
	q.Run([]*trt.Tensor{e2e}, nil, &out)
	if len(out.Detections) != 1 || len(out.Detections[0].Keypoints) != 6 || out.Detections[0].Keypoints[3] != 13 {
		t.Fatalf("end2end pose %+v", out.Detections)
	}
}

// TestUnreadableTensor: memory the CPU cannot read now gives an output
// with no values instead of a crash.
func TestUnreadableTensor(t *testing.T) {
	x := tensor(t, "det", trt.Float32, []int64{1, 6, 8}, make([]float32, 48))
	p := mustNew(t, Options{Kind: Detections}, x)
	var out stream.Output
	p.Run([]*trt.Tensor{{TensorSpec: x.TensorSpec}}, nil, &out)
	if len(out.Detections) != 0 || out.Kind != stream.OutputDetections {
		t.Fatalf("%+v", out)
	}
}

func TestShapeErrors(t *testing.T) {
	for _, tc := range []struct {
		in []trt.TensorSpec
		o  Options
	}{
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, 3, 100}}}, Options{Kind: Detections}},
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, -1}}}, Options{}},
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, 2}}}, Options{Kind: "nope"}},
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{2, 84, 8400}}}, Options{Kind: Detections}},
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, 300, 7}}}, Options{Kind: Detections, Format: FormatEnd2End}},
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, 300, 6}}}, Options{Kind: Detections, Format: FormatRTDETR}}, // no input size
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, 84, 8400}}}, Options{Kind: Detections, Format: FormatEfficientNMS}},
		{[]trt.TensorSpec{{Name: "d", Shape: []int64{1, 84, 8400}}}, Options{Kind: Keypoints, Format: FormatYOLOv8, Classes: 1, KeypointCount: 17, KeypointDims: 3}},
		{[]trt.TensorSpec{{Name: "a", Shape: []int64{1, 2}}, {Name: "b", Shape: []int64{1, 2}}}, Options{Kind: Raw}},
	} {
		if _, err := New(tc.in, tc.o); err == nil {
			t.Errorf("%v %+v accepted", tc.in, tc.o)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	x := tensor(t, "cls", trt.Float32, []int64{1, 1000}, make([]float32, 1000))
	r := tensor(t, "raw", trt.Int64, []int64{1, 2}, []float32{1, 2})
	p := mustNew(t, Options{Kind: TopK, K: 5, Softmax: true}, x)
	q := mustNew(t, Options{}, r)
	var out stream.Output
	if n := testing.AllocsPerRun(50, func() { p.Run([]*trt.Tensor{x}, nil, &out); q.Run([]*trt.Tensor{r}, nil, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
