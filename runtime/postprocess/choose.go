package postprocess

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edged-dev/edged/trt"
)

// Request is what a configuration says about one detections or keypoints
// output, for Choose.
type Request struct {
	Kind   string // Detections or Keypoints
	Format string // FormatAuto or a format
	// Output is the index, in the engine's outputs, of the output the
	// configuration names; Outputs, when set, lists every output the
	// format reads, in its order (Output among them).
	Output  int
	Outputs []int
	// Labels is the number of class names known (configured, else from
	// the model's metadata); 0 when none.
	Labels int
	// Metadata is what the model file says about itself, or nil.
	Metadata *trt.Metadata
}

// Choice is how Choose decided to read a detector.
type Choice struct {
	Format string
	// Inputs are the engine outputs the format reads (indices), in its
	// order; Inputs[0] names the result.
	Inputs []int
	// Classes, Extra, KeypointCount and KeypointDims go to Options.
	Classes, Extra              int
	KeypointCount, KeypointDims int
	// Why says how the format was decided, for edged check and the log.
	Why string

	transposed bool // a one-tensor layout of attributes × boxes
}

// efficientNMSNames are the output names TensorRT's EfficientNMS plugin
// is exported with (num_dets, det_boxes, det_scores, det_classes in most
// YOLO exports; the plugin's own documentation says num_detections,
// detection_boxes, ...), in the plugin's order.
var efficientNMSNames = [][4]string{
	{"num_dets", "det_boxes", "det_scores", "det_classes"},
	{"num_detections", "detection_boxes", "detection_scores", "detection_classes"},
	{"num", "boxes", "scores", "classes"},
}

// Choose decides how a detections or keypoints output is read: the
// format (for FormatAuto from the model's metadata and the shapes), the
// outputs a multi-output format reads and the columns of a one-tensor
// one. When the shapes fit more than one format and nothing else decides,
// the error (wrapping ErrAmbiguous) names every reading and asks for
// format to be set; a format that does not fit wraps ErrShape.
func Choose(r Request, outs []trt.TensorSpec) (Choice, error) {
	if r.Output < 0 || r.Output >= len(outs) {
		return Choice{}, fmt.Errorf("%w: no output %d", ErrShape, r.Output)
	}
	if r.Format != FormatAuto && r.Format != "" {
		c, err := fit(r, outs, r.Format)
		if err == nil {
			c.Why = "format = \"" + r.Format + "\" in the configuration"
		}
		return c, err
	}
	md := r.Metadata
	var readings []Choice
	var whyNot []string
	for _, f := range []string{FormatEfficientNMS, FormatEnd2End, FormatYOLOv8, FormatYOLOv5, FormatRTDETR} {
		c, err := fit(r, outs, f)
		if err != nil || !plausible(c, outs) {
			whyNot = append(whyNot, f)
			continue
		}
		readings = append(readings, c)
	}
	if len(readings) == 0 {
		return Choice{}, fmt.Errorf("%w: none of the detector formats (%s) reads it; docs/TENSORRT.md lists the shapes of each",
			ErrShape, strings.Join(whyNot, ", "))
	}
	// What the model says about itself decides first.
	pick := func(f, why string) (Choice, bool) {
		for _, c := range readings {
			if c.Format == f {
				c.Why = why
				return c, true
			}
		}
		return Choice{}, false
	}
	if md != nil && md.End2End {
		if c, ok := pick(FormatEnd2End, md.From+" says end2end (or nms=True): final boxes"); ok {
			return c, nil
		}
	}
	if c, ok := pick(FormatEfficientNMS, "the EfficientNMS plugin's four outputs"); ok {
		return c, nil
	}
	if md != nil && strings.Contains(strings.ToLower(strings.ReplaceAll(md.Description, "-", "")), "rtdetr") {
		if c, ok := pick(FormatRTDETR, md.From+" describes an RT-DETR model"); ok {
			return c, nil
		}
	}
	readings = prune(readings, md)
	if len(readings) == 1 {
		c := readings[0]
		if c.Why == "" {
			c.Why = "the only format the output's shape fits"
		}
		return c, nil
	}
	var names []string
	for _, c := range readings {
		names = append(names, describe(c, outs))
	}
	return Choice{}, fmt.Errorf("%w: it can be read as %s; set format = \"%s\" (or another) for it",
		ErrAmbiguous, strings.Join(names, " or as "), readings[0].Format)
}

// plausible: a one-tensor reading has more boxes than values per box
// (detectors have hundreds or thousands of boxes and at most a few hundred
// values each), so [1, 84, 8400] is not 84 boxes of 8400 values. A format
// set in the configuration is not held to it.
func plausible(c Choice, outs []trt.TensorSpec) bool {
	if len(c.Inputs) != 1 {
		return true
	}
	s := outs[c.Inputs[0]].Shape
	if len(s) != 3 {
		return false
	}
	boxes, attrs := s[1], s[2]
	if c.transposed {
		boxes, attrs = attrs, boxes
	}
	return boxes > attrs
}

// prune drops readings the model's metadata rules out: an Ultralytics
// export that is not end-to-end outputs raw YOLOv8 boxes (transposed) or,
// for RT-DETR, rows; one whose metadata has the end2end key false is not
// end-to-end.
func prune(rs []Choice, md *trt.Metadata) []Choice {
	if md == nil {
		return rs
	}
	out := rs[:0:0]
	for _, c := range rs {
		if c.Format == FormatEnd2End && !md.End2End && (slices.Contains(md.Keys, "end2end") || slices.Contains(md.Keys, "args")) {
			continue
		}
		if strings.HasPrefix(md.Producer, "Ultralytics") && (c.Format == FormatYOLOv5 || c.Format == FormatYOLOv8 && !c.transposed) {
			continue // Ultralytics' YOLO heads export [1, 4+C, N]; its YOLOv5u has the YOLOv8 head
		}
		out = append(out, c)
	}
	if len(out) > 0 && len(out) < len(rs) {
		out[0].Why = md.From + " rules out the other formats the shape fits"
	}
	if len(out) == 0 {
		return rs
	}
	return out
}

// describe says how c reads the output, for the ambiguity error.
func describe(c Choice, outs []trt.TensorSpec) string {
	s := outs[c.Inputs[0]]
	n := s.Shape[len(s.Shape)-2]
	switch c.Format {
	case FormatEnd2End:
		return fmt.Sprintf("%s (%d final boxes of x1, y1, x2, y2, score, class, no NMS)", c.Format, n)
	case FormatYOLOv5:
		return fmt.Sprintf("%s (%d boxes of cx, cy, w, h, objectness and %s)", c.Format, n, classScores(c.Classes))
	case FormatRTDETR:
		return fmt.Sprintf("%s (%d queries of normalised cx, cy, w, h and %s)", c.Format, n, classScores(c.Classes))
	case FormatYOLOv8:
		if s.Shape[1] < s.Shape[2] {
			n = s.Shape[2]
		}
		return fmt.Sprintf("%s (%d boxes of cx, cy, w, h and %s)", c.Format, n, classScores(c.Classes))
	}
	return c.Format
}

func classScores(n int) string {
	if n == 1 {
		return "1 class score"
	}
	return fmt.Sprintf("%d class scores", n)
}

// fit reports whether format f reads the requested output, and how.
func fit(r Request, outs []trt.TensorSpec, f string) (Choice, error) {
	c := Choice{Format: f, Inputs: []int{r.Output}}
	if f == FormatEfficientNMS {
		in, err := efficientNMSOutputs(r, outs)
		if err != nil {
			return Choice{}, err
		}
		c.Inputs = in
	} else if f == FormatRTDETR {
		if in, ok := rtdetrPair(r, outs); ok {
			c.Inputs = in
		}
	} else if len(r.Outputs) > 1 {
		return Choice{}, fmt.Errorf("%w: format %s reads one output, but outputs lists %d", ErrShape, f, len(r.Outputs))
	}
	o := Options{Kind: r.Kind, Format: f, InputW: 1, InputH: 1}
	md := r.Metadata
	o.Classes = r.Labels
	if f == FormatYOLOv8 && md != nil && md.Task == trt.TaskSegment && r.Labels > 0 {
		o.Extra = 32 // Ultralytics' mask coefficients
	}
	if f == FormatEnd2End {
		o.Classes = 0
		if md != nil && md.Task == trt.TaskSegment {
			o.Extra = 32
		}
	}
	if r.Kind == Keypoints && md != nil && len(md.KptShape) == 2 {
		o.KeypointCount, o.KeypointDims = md.KptShape[0], md.KptShape[1]
	}
	specs := make([]trt.TensorSpec, len(c.Inputs))
	for i, j := range c.Inputs {
		specs[i] = outs[j]
	}
	d, err := newDetector(specs, &o)
	if err != nil {
		return Choice{}, err
	}
	if f == FormatYOLOv8 || f == FormatYOLOv5 || f == FormatRTDETR {
		if r.Labels > 0 && d.classes != r.Labels {
			return Choice{}, fmt.Errorf("%w: %d classes, %d labels", ErrLabels, d.classes, r.Labels)
		}
	}
	if (f == FormatYOLOv5 || f == FormatRTDETR) && d.transposed {
		return Choice{}, fmt.Errorf("%w: format %s outputs box rows", ErrShape, f)
	}
	c.Classes, c.Extra, c.KeypointCount, c.KeypointDims, c.transposed = o.Classes, o.Extra, d.kpts, d.kdims, d.transposed
	if f != FormatEnd2End && f != FormatEfficientNMS {
		c.Classes = d.classes
	}
	return c, nil
}

// rtdetrPair finds the scores output [1, N, C] beside a boxes output
// [1, N, 4] (RT-DETR exports without a fused head), or takes Outputs.
func rtdetrPair(r Request, outs []trt.TensorSpec) ([]int, bool) {
	if len(r.Outputs) == 2 {
		return r.Outputs, true
	}
	b := outs[r.Output].Shape
	if len(b) != 3 || b[2] != 4 {
		return nil, false
	}
	var found []int
	for j, s := range outs {
		if j != r.Output && len(s.Shape) == 3 && s.Shape[0] == 1 && s.Shape[1] == b[1] && s.Shape[2] > 0 {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		return nil, false
	}
	return []int{r.Output, found[0]}, true
}

var errNotNMS = errors.New("not the EfficientNMS outputs")

// efficientNMSOutputs finds the plugin's four outputs: Outputs when
// given, else by their usual names, else by shape and type (num_dets
// [1,1], boxes [1,K,4], scores [1,K] float, classes [1,K] integer).
func efficientNMSOutputs(r Request, outs []trt.TensorSpec) ([]int, error) {
	if len(r.Outputs) > 0 {
		if len(r.Outputs) != 4 {
			return nil, fmt.Errorf("%w: format efficientnms reads four outputs, outputs lists %d", ErrShape, len(r.Outputs))
		}
		return r.Outputs, nil
	}
	byName := map[string]int{}
	for j, s := range outs {
		byName[s.Name] = j
	}
	for _, set := range efficientNMSNames {
		idx := make([]int, 0, 4)
		for _, n := range set {
			if j, ok := byName[n]; ok {
				idx = append(idx, j)
			}
		}
		if len(idx) == 4 && slices.Contains(idx, r.Output) {
			return idx, nil
		}
	}
	// By shape: exactly one candidate for each role.
	var num, boxes, scores, classes []int
	for j, s := range outs {
		sh := s.Shape
		switch {
		case s.Elements() == 1 && len(sh) == 2:
			num = append(num, j)
		case len(sh) == 3 && sh[0] == 1 && sh[2] == 4:
			boxes = append(boxes, j)
		case len(sh) == 2 && sh[0] == 1 && sh[1] > 1 && (s.Type == trt.Float32 || s.Type == trt.Float16):
			scores = append(scores, j)
		case len(sh) == 2 && sh[0] == 1 && sh[1] > 1:
			classes = append(classes, j)
		}
	}
	if len(num) != 1 || len(boxes) != 1 || len(scores) != 1 || len(classes) != 1 {
		return nil, fmt.Errorf("%w: %w", ErrShape, errNotNMS)
	}
	idx := []int{num[0], boxes[0], scores[0], classes[0]}
	if !slices.Contains(idx, r.Output) {
		return nil, fmt.Errorf("%w: %w", ErrShape, errNotNMS)
	}
	return idx, nil
}
