package postprocess

import (
	"math"
	"testing"

	"github.com/edged-dev/edged/runtime/stream"
)

func TestRawCapsAndFlags(t *testing.T) {
	p, err := New("x", []int64{1, 6}, Options{Kind: Raw, MaxValues: 4})
	if err != nil {
		t.Fatal(err)
	}
	var out stream.Output
	p.Run([]float32{1, 2, 3, 4, 5, 6}, nil, &out)
	if out.Kind != stream.OutputRaw || len(out.Data) != 4 || !out.Truncated || out.Data[3] != 4 {
		t.Fatalf("%+v", out)
	}
	p.Run([]float32{9, 8, 7}, nil, &out) // shorter than the cap
	if len(out.Data) != 3 || out.Truncated || out.Data[0] != 9 {
		t.Fatalf("%+v", out)
	}
}

func TestTopK(t *testing.T) {
	labels := []string{"a", "b", "c", "d"}
	p, err := New("cls", []int64{1, 4}, Options{Kind: TopK, K: 2, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	var out stream.Output
	p.Run([]float32{0.1, 0.6, float32(math.NaN()), 0.3}, nil, &out)
	if len(out.Classes) != 2 || out.Classes[0].Index != 1 || out.Classes[0].Label != "b" || out.Classes[1].Index != 3 {
		t.Fatalf("%+v", out.Classes)
	}
	ps, _ := New("cls", []int64{1, 3}, Options{Kind: TopK, K: 1, Softmax: true})
	ps.Run([]float32{0, 0, math.Float32frombits(0x40000000)}, nil, &out) // 2.0
	want := float32(math.Exp(2) / (2 + math.Exp(2)))
	if out.Classes[0].Index != 2 || math.Abs(float64(out.Classes[0].Score-want)) > 1e-6 {
		t.Fatalf("softmax: %+v want %v", out.Classes, want)
	}
	if _, err := New("cls", []int64{1, 4}, Options{Kind: TopK, Labels: labels[:3]}); err == nil {
		t.Error("label count mismatch accepted")
	}
}

type halve struct{}

func (halve) ToSource(x, y float32) (float32, float32) { return x * 2, y * 2 }

func TestDetectionsNMS(t *testing.T) {
	// [1, 4+2, 8] transposed layout: boxes as columns (more boxes than
	// attributes is how the layout is told apart).
	boxes := [8][6]float32{
		{50, 50, 20, 20, 0.9, 0.1},  // class 0
		{52, 51, 20, 20, 0.8, 0.05}, // overlaps box 0, same class: suppressed
		{52, 51, 20, 20, 0.1, 0.7},  // same place, other class: kept
		{10, 10, 4, 4, 0.2, 0.1},    // below threshold
	}
	v := make([]float32, 6*8)
	for b, row := range boxes {
		for a, x := range row {
			v[a*8+b] = x
		}
	}
	p, err := New("det", []int64{1, 6, 8}, Options{Kind: Detections, ScoreThreshold: 0.25, IOUThreshold: 0.45, MaxDetections: 10, Labels: []string{"cat", "dog"}})
	if err != nil {
		t.Fatal(err)
	}
	var out stream.Output
	p.Run(v, halve{}, &out)
	if len(out.Detections) != 2 {
		t.Fatalf("%+v", out.Detections)
	}
	d := out.Detections[0]
	if d.Class != 0 || d.Label != "cat" || d.Box != [4]float32{80, 80, 120, 120} || d.Score != 0.9 {
		t.Fatalf("first %+v", d)
	}
	if out.Detections[1].Class != 1 || out.Detections[1].Label != "dog" {
		t.Fatalf("second %+v", out.Detections[1])
	}
	// Same data in [1, boxes, attrs] layout gives the same answer.
	flat := make([]float32, 0, 48)
	for _, row := range boxes {
		flat = append(flat, row[:]...)
	}
	q, _ := New("det", []int64{1, 8, 6}, Options{Kind: Detections, ScoreThreshold: 0.25, IOUThreshold: 0.45})
	var out2 stream.Output
	q.Run(flat, halve{}, &out2)
	if len(out2.Detections) != 2 || out2.Detections[0].Box != d.Box {
		t.Fatalf("row layout %+v", out2.Detections)
	}
	if n := testing.AllocsPerRun(50, func() { p.Run(v, halve{}, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestShapeErrors(t *testing.T) {
	if _, err := New("d", []int64{1, 3, 100}, Options{Kind: Detections}); err == nil {
		t.Error("3 attributes accepted")
	}
	if _, err := New("d", []int64{1, -1}, Options{}); err == nil {
		t.Error("dynamic shape accepted")
	}
	if _, err := New("d", []int64{1, 2}, Options{Kind: "nope"}); err == nil {
		t.Error("unknown kind accepted")
	}
}

func TestNoAllocations(t *testing.T) {
	p, _ := New("cls", []int64{1, 1000}, Options{Kind: TopK, K: 5, Softmax: true})
	r, _ := New("raw", []int64{1, 2}, Options{})
	v := make([]float32, 1000)
	var out stream.Output
	if n := testing.AllocsPerRun(50, func() { p.Run(v, nil, &out); r.Run(v[:2], nil, &out) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
