package postprocess

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

func spec(name string, d trt.DataType, shape ...int64) trt.TensorSpec {
	return trt.TensorSpec{Name: name, Type: d, Shape: shape}
}

var ultralytics = &trt.Metadata{From: trt.FromONNXProps, Producer: "Ultralytics 8.3.40", Task: trt.TaskDetect,
	Keys: []string{"args", "author", "names", "task"}}

func TestChoose(t *testing.T) {
	f32 := trt.Float32
	nms := []trt.TensorSpec{spec("num_dets", trt.Int32, 1, 1), spec("det_boxes", f32, 1, 100, 4),
		spec("det_scores", f32, 1, 100), spec("det_classes", trt.Int32, 1, 100)}
	renamed := []trt.TensorSpec{spec("a", trt.Int32, 1, 1), spec("b", f32, 1, 100, 4), spec("c", trt.Float16, 1, 100), spec("d", trt.Int32, 1, 100)}
	for _, tc := range []struct {
		name   string
		r      Request
		outs   []trt.TensorSpec
		format string
		inputs []int
		why    string
		// classes, extra and keypoints, when not 0
		classes, extra, kpts, kdims int
	}{
		{name: "yolov8 transposed", r: Request{Kind: Detections}, outs: []trt.TensorSpec{spec("output0", f32, 1, 84, 8400)},
			format: FormatYOLOv8, inputs: []int{0}, classes: 80, why: "the only format"},
		{name: "yolov8 with ultralytics metadata", r: Request{Kind: Detections, Labels: 80, Metadata: ultralytics},
			outs: []trt.TensorSpec{spec("output0", trt.Float16, 1, 84, 8400)}, format: FormatYOLOv8, inputs: []int{0}, classes: 80},
		{name: "yolov8 segment", r: Request{Kind: Detections, Labels: 80, Metadata: &trt.Metadata{Task: trt.TaskSegment}},
			outs:   []trt.TensorSpec{spec("output0", f32, 1, 116, 8400), spec("output1", f32, 1, 32, 160, 160)},
			format: FormatYOLOv8, inputs: []int{0}, classes: 80, extra: 32},
		{name: "yolov5 by its labels", r: Request{Kind: Detections, Labels: 80}, outs: []trt.TensorSpec{spec("output", f32, 1, 25200, 85)},
			format: FormatYOLOv5, inputs: []int{0}, classes: 80},
		{name: "end2end from metadata", r: Request{Kind: Detections, Metadata: &trt.Metadata{From: trt.FromEngineHeader, End2End: true}},
			outs: []trt.TensorSpec{spec("output0", f32, 1, 300, 6)}, format: FormatEnd2End, inputs: []int{0}, why: "says end2end"},
		{name: "ultralytics not end2end rules it out", r: Request{Kind: Detections, Metadata: &trt.Metadata{Producer: "Ultralytics 8.3.0", Description: "Ultralytics rtdetr-l model", Keys: []string{"end2end"}}},
			outs: []trt.TensorSpec{spec("output0", f32, 1, 300, 84)}, format: FormatRTDETR, inputs: []int{0}, classes: 80, why: "RT-DETR"},
		{name: "efficientnms by names", r: Request{Kind: Detections, Output: 1}, outs: nms,
			format: FormatEfficientNMS, inputs: []int{0, 1, 2, 3}, why: "EfficientNMS"},
		{name: "efficientnms by shapes", r: Request{Kind: Detections, Output: 0}, outs: renamed,
			format: FormatEfficientNMS, inputs: []int{0, 1, 2, 3}},
		{name: "efficientnms listed", r: Request{Kind: Detections, Output: 1, Outputs: []int{0, 1, 2, 3}}, outs: renamed,
			format: FormatEfficientNMS, inputs: []int{0, 1, 2, 3}},
		{name: "rtdetr two outputs", r: Request{Kind: Detections, Output: 0}, outs: []trt.TensorSpec{spec("pred_boxes", f32, 1, 300, 4), spec("pred_logits", f32, 1, 300, 80)},
			format: FormatRTDETR, inputs: []int{0, 1}, classes: 80},
		{name: "pose transposed", r: Request{Kind: Keypoints, Metadata: &trt.Metadata{Task: trt.TaskPose, KptShape: []int{17, 3}}},
			outs: []trt.TensorSpec{spec("output0", f32, 1, 56, 8400)}, format: FormatYOLOv8, inputs: []int{0}, classes: 1, kpts: 17, kdims: 3},
		{name: "pose end2end", r: Request{Kind: Keypoints, Metadata: &trt.Metadata{End2End: true, KptShape: []int{17, 3}}},
			outs: []trt.TensorSpec{spec("output0", f32, 1, 300, 57)}, format: FormatEnd2End, inputs: []int{0}, kpts: 17, kdims: 3},
		{name: "explicit format", r: Request{Kind: Detections, Format: FormatYOLOv8}, outs: []trt.TensorSpec{spec("output0", f32, 1, 300, 6)},
			format: FormatYOLOv8, inputs: []int{0}, classes: 2, why: "in the configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Choose(tc.r, tc.outs)
			if err != nil {
				t.Fatal(err)
			}
			if c.Format != tc.format || !slices.Equal(c.Inputs, tc.inputs) || c.Classes != tc.classes || c.Extra != tc.extra ||
				c.KeypointCount != tc.kpts || c.KeypointDims != tc.kdims || !strings.Contains(c.Why, tc.why) {
				t.Errorf("%+v", c)
			}
		})
	}
}

func TestChooseRefuses(t *testing.T) {
	f32 := trt.Float32
	for _, tc := range []struct {
		name string
		r    Request
		outs []trt.TensorSpec
		is   error
		want []string
	}{
		// The example: end-to-end or a two-class YOLOv8 (and more).
		{"[1,300,6]", Request{Kind: Detections}, []trt.TensorSpec{spec("output0", f32, 1, 300, 6)}, ErrAmbiguous,
			[]string{"end2end (300 final boxes of x1, y1, x2, y2, score, class, no NMS)", "yolov8 (300 boxes of cx, cy, w, h and 2 class scores)", `set format = "end2end"`}},
		{"rows without labels", Request{Kind: Detections}, []trt.TensorSpec{spec("output", f32, 1, 25200, 85)}, ErrAmbiguous,
			[]string{"yolov8 (25200 boxes of cx, cy, w, h and 81 class scores)", "yolov5 (25200 boxes of cx, cy, w, h, objectness and 80 class scores)", "rtdetr"}},
		{"nothing fits", Request{Kind: Detections}, []trt.TensorSpec{spec("output0", f32, 1, 1000)}, ErrShape,
			[]string{"none of the detector formats (efficientnms, end2end, yolov8, yolov5, rtdetr) reads it"}},
		{"explicit format that does not fit", Request{Kind: Detections, Format: FormatEnd2End}, []trt.TensorSpec{spec("output0", f32, 1, 84, 8400)}, ErrShape,
			[]string{"format end2end"}},
		{"labels that fit no reading", Request{Kind: Detections, Labels: 3}, []trt.TensorSpec{spec("output0", f32, 1, 84, 8400)}, ErrShape,
			[]string{"none of the detector formats"}},
		{"efficientnms with one output listed", Request{Kind: Detections, Format: FormatEfficientNMS, Outputs: []int{0}}, []trt.TensorSpec{spec("num_dets", trt.Int32, 1, 1)}, ErrShape,
			[]string{"four outputs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Choose(tc.r, tc.outs)
			if !errors.Is(err, tc.is) {
				t.Fatalf("%v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
