package postprocess

import (
	"math/rand/v2"
	"testing"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt"
)

// yolov8Frame is a [1, 84, 8400] YOLOv8 output as a detector gives it on a
// busy scene: 8400 candidate boxes, scores mostly near zero, 30 objects
// with a few overlapping boxes each above the threshold.
func yolov8Frame() []float32 {
	const attrs, boxes = 84, 8400
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, attrs*boxes)
	for b := range boxes {
		v[0*boxes+b] = r.Float32() * 640
		v[1*boxes+b] = r.Float32() * 640
		v[2*boxes+b] = 8 + r.Float32()*120
		v[3*boxes+b] = 8 + r.Float32()*120
		for c := 4; c < attrs; c++ {
			v[c*boxes+b] = 0.001 + r.Float32()*0.02
		}
	}
	for obj := range 30 {
		cls := 4 + obj%80
		for k := range 4 { // overlapping boxes of one object
			b := obj*280 + k*7
			v[0*boxes+b] = float32(20*obj) + float32(k)
			v[1*boxes+b] = float32(15*obj) + float32(k)
			v[2*boxes+b], v[3*boxes+b] = 60, 80
			v[cls*boxes+b] = 0.5 + 0.1*float32(k)
		}
	}
	return v
}

// BenchmarkDetectionsYOLOv8 decodes one YOLOv8n-sized output per op: the
// float32 output read in place, and the same values as float16 (what an
// engine built with --outputIOFormats=fp16:chw gives), which are widened
// first (trt.Float16ToFloat32Into); "box-by-box" is the baseline, the
// float32 output read one box at a time as before (each score a row
// apart).
func BenchmarkDetectionsYOLOv8(b *testing.B) {
	v := yolov8Frame()
	for _, bc := range []struct {
		name    string
		d       trt.DataType
		rowWise bool
	}{{"box-by-box", trt.Float32, false}, {"float32", trt.Float32, true}, {"float16", trt.Float16, true}} {
		d := bc.d
		b.Run(bc.name, func(b *testing.B) {
			rowWiseScores = bc.rowWise
			defer func() { rowWiseScores = true }()
			x := tensor(b, "output0", d, []int64{1, 84, 8400}, v)
			p := mustNew(b, Options{Kind: Detections, ScoreThreshold: 0.25, IOUThreshold: 0.45, MaxDetections: 100}, x)
			var out stream.Output
			ts := []*trt.Tensor{x}
			b.ReportAllocs()
			for b.Loop() {
				p.Run(ts, nil, &out)
			}
			if len(out.Detections) != 30 {
				b.Fatalf("%d detections, want 30", len(out.Detections))
			}
		})
	}
}
