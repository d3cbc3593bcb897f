package postprocess

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt"
)

// detector decodes the boxes of one detector output (detections and
// keypoints kinds) in one of the formats, keeps those above the score
// threshold, suppresses overlaps where the format has not (NMS) and maps
// boxes and keypoints to source pixels.
type detector struct {
	opt    *Options
	format string

	// One-tensor layouts: boxes rows of attrs values, stored box-major
	// ([1, N, attrs]) or, transposed, attribute-major ([1, attrs, N]).
	boxes, attrs int
	transposed   bool
	clsOff       int // first class score column
	classes      int // class score columns
	kptOff       int // first keypoint column
	kpts, kdims  int

	scaleX, scaleY float32 // RT-DETR: fractions of the input to pixels
	nms            bool

	cand  []cand
	best  []int32   // transposed layouts: each box's best class so far
	score []float32 // and its score
	dets  []stream.Detection
	kp    []float32 // keypoints of dets, kpts*kdims each
}

// cand is a box above the threshold, in input pixels, before NMS.
type cand struct {
	box   [4]float32
	score float32
	class int
	row   int // where its keypoints are
}

func shapeOf(s trt.TensorSpec) string { return s.String() }

func newDetector(in []trt.TensorSpec, o *Options) (*detector, error) {
	if o.Format == "" {
		o.Format = FormatYOLOv8
	}
	if o.MaxDetections <= 0 {
		o.MaxDetections = 100
	}
	d := &detector{opt: o, format: o.Format, scaleX: 1, scaleY: 1}
	for _, s := range in {
		if len(s.Shape) == 0 || s.Shape[0] != 1 {
			return nil, fmt.Errorf("%w: output %s: edged runs batch 1, and its first dimension is not 1", ErrShape, shapeOf(s))
		}
	}
	var err error
	switch o.Format {
	case FormatYOLOv8, FormatYOLOv5, FormatEnd2End:
		err = d.layoutRows(in)
	case FormatRTDETR:
		err = d.layoutRTDETR(in)
	case FormatEfficientNMS:
		err = d.layoutEfficientNMS(in)
	default:
		return nil, fmt.Errorf("%w: unknown detector format %q", ErrShape, o.Format)
	}
	if err != nil {
		return nil, err
	}
	if o.Kind == Keypoints && d.kpts == 0 {
		return nil, fmt.Errorf("%w: format %s gives no keypoints", ErrShape, d.format)
	}
	if len(o.Labels) > 0 && d.classes > 0 && len(o.Labels) != d.classes {
		return nil, fmt.Errorf("%w: output %q has %d classes but %d labels are configured", ErrLabels, in[0].Name, d.classes, len(o.Labels))
	}
	d.cand = make([]cand, 0, d.boxes)
	if d.transposed {
		d.best, d.score = make([]int32, d.boxes), make([]float32, d.boxes)
	}
	d.dets = make([]stream.Detection, 0, o.MaxDetections)
	d.kp = make([]float32, o.MaxDetections*d.kpts*d.kdims)
	return d, nil
}

// layoutRows reads the one-tensor YOLO layouts.
func (d *detector) layoutRows(in []trt.TensorSpec) error {
	o := d.opt
	if len(in) != 1 || len(in[0].Shape) != 3 {
		return fmt.Errorf("%w: output %s; format %s needs one output [1, attributes, boxes] or [1, boxes, attributes]", ErrShape, shapeOf(in[0]), d.format)
	}
	a, b := int(in[0].Shape[1]), int(in[0].Shape[2])
	d.transposed = a < b && d.format != FormatEnd2End // end-to-end outputs are rows of 6
	if d.transposed {
		d.attrs, d.boxes = a, b
	} else {
		d.boxes, d.attrs = a, b
	}
	first := map[string]int{FormatYOLOv8: 4, FormatYOLOv5: 5, FormatEnd2End: 6}[d.format]
	rest := d.attrs - first - o.Extra
	switch {
	case d.format == FormatEnd2End:
		d.nms = false
	case o.Kind == Keypoints:
		d.clsOff, d.classes, d.nms = first, max(o.Classes, 1), true
		rest -= d.classes
	default:
		d.clsOff, d.classes, d.nms = first, rest, true
		if o.Classes > 0 {
			d.classes = o.Classes
		}
		rest -= d.classes
	}
	if d.format != FormatEnd2End && d.classes < 1 {
		return fmt.Errorf("%w: output %s has %d values per box; format %s needs %d box values and at least one class score",
			ErrShape, shapeOf(in[0]), d.attrs, d.format, first)
	}
	if o.Kind == Keypoints {
		return d.layoutKeypoints(in[0], first+d.classes+o.Extra, rest)
	}
	if rest != 0 {
		return fmt.Errorf("%w: output %s has %d values per box, but format %s with %d classes and %d extra columns has %d",
			ErrShape, shapeOf(in[0]), d.attrs, d.format, d.classes, o.Extra, d.attrs-rest)
	}
	return nil
}

// layoutKeypoints places count × dims keypoint values after the columns
// before off.
func (d *detector) layoutKeypoints(s trt.TensorSpec, off, rest int) error {
	o := d.opt
	k, dims := o.KeypointCount, o.KeypointDims
	if k == 0 && dims == 0 {
		dims = 3
		if rest%3 != 0 {
			dims = 2
		}
		k = rest / dims
	}
	if k < 1 || (dims != 2 && dims != 3) || k*dims != rest {
		return fmt.Errorf("%w: output %s leaves %d values per box for keypoints, which is not keypoints × 2 or 3", ErrShape, shapeOf(s), rest)
	}
	d.kptOff, d.kpts, d.kdims = off, k, dims
	return nil
}

func (d *detector) layoutRTDETR(in []trt.TensorSpec) error {
	o := d.opt
	if o.InputW <= 0 || o.InputH <= 0 {
		return fmt.Errorf("%w: format rtdetr needs the input size its boxes are fractions of", ErrShape)
	}
	d.scaleX, d.scaleY = float32(o.InputW), float32(o.InputH)
	d.nms = false
	switch {
	case len(in) == 1 && len(in[0].Shape) == 3 && in[0].Shape[2] > 4:
		d.boxes, d.attrs, d.clsOff = int(in[0].Shape[1]), int(in[0].Shape[2]), 4
		d.classes = d.attrs - 4
	case len(in) == 2 && len(in[0].Shape) == 3 && in[0].Shape[2] == 4 && len(in[1].Shape) == 3 && in[1].Shape[1] == in[0].Shape[1]:
		d.boxes, d.attrs, d.classes = int(in[0].Shape[1]), 4, int(in[1].Shape[2])
	default:
		return fmt.Errorf("%w: outputs %s; format rtdetr needs [1, queries, 4+classes], or boxes [1, queries, 4] and scores [1, queries, classes]",
			ErrShape, specList(in))
	}
	if o.Kind == Keypoints {
		return fmt.Errorf("%w: format rtdetr gives no keypoints", ErrShape)
	}
	return nil
}

func (d *detector) layoutEfficientNMS(in []trt.TensorSpec) error {
	if len(in) != 4 {
		return fmt.Errorf("%w: format efficientnms reads four outputs (num_dets, boxes, scores, classes), got %d", ErrShape, len(in))
	}
	num, boxes, scores, classes := in[0].Shape, in[1].Shape, in[2].Shape, in[3].Shape
	k := int64(-1)
	if len(boxes) == 3 && boxes[2] == 4 {
		k = boxes[1]
	}
	if in[0].Elements() != 1 || k < 1 || len(scores) != 2 || scores[1] != k || len(classes) != 2 || classes[1] != k {
		return fmt.Errorf("%w: outputs %s; format efficientnms needs num_dets [1,1], boxes [1,K,4], scores [1,K] and classes [1,K]",
			ErrShape, specList(in))
	}
	_ = num
	d.boxes, d.nms = int(k), false
	if d.opt.Kind == Keypoints {
		return fmt.Errorf("%w: format efficientnms gives no keypoints", ErrShape)
	}
	return nil
}

func specList(in []trt.TensorSpec) string {
	s := ""
	for i, t := range in {
		if i > 0 {
			s += ", "
		}
		s += t.String()
	}
	return s
}

// run decodes one frame's tensors ts, read through ins.
func (d *detector) run(ins []input, ts []*trt.Tensor, m Mapper) []stream.Detection {
	d.cand = d.cand[:0]
	d.dets = d.dets[:0]
	if len(ts) != len(ins) {
		return d.dets
	}
	var v [4][]float32
	for i := range ins {
		if v[i] = ins[i].values(ts[i]); v[i] == nil {
			return d.dets
		}
	}
	switch d.format {
	case FormatEfficientNMS:
		d.candEfficientNMS(v[0], v[1], v[2], v[3])
	case FormatEnd2End:
		d.candEnd2End(v[0])
	default:
		if len(ins) == 2 { // RT-DETR boxes + scores
			d.candScored(v[0], v[1])
		} else {
			d.candScored(v[0], v[0])
		}
	}
	d.selectBoxes()
	d.finish(v[0], m)
	return d.dets
}

// at is value attr of box i of a one-tensor layout.
func (d *detector) at(v []float32, i, attr int) float32 {
	if d.transposed {
		return v[attr*d.boxes+i]
	}
	return v[i*d.attrs+attr]
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// rowWiseScores is off only in the benchmark's baseline, the box-by-box
// reading bestClasses replaced.
var rowWiseScores = true

// bestClasses finds each box's best class score of a transposed layout
// class row by class row, so the reads run along memory (box by box they
// would stride a whole row apart for every score: ten times slower on a
// [1, 84, 8400] output).
func (d *detector) bestClasses(v []float32) {
	best, score := d.best[:d.boxes], d.score[:d.boxes]
	for i := range best {
		best[i], score[i] = -1, 0
	}
	for c := 0; c < d.classes; c++ {
		row := v[(d.clsOff+c)*d.boxes:][:d.boxes]
		for i, x := range row {
			if x > score[i] {
				best[i], score[i] = int32(c), x
			}
		}
	}
}

// candScored collects the boxes of the formats whose boxes carry class
// scores (YOLOv8, YOLOv5, RT-DETR): v holds the boxes, s the class scores
// (the same tensor, except for two-output RT-DETR, whose s is [1, N, C]).
func (d *detector) candScored(v, s []float32) {
	o := d.opt
	sep := len(s) != len(v) || d.attrs == 4
	rowWise := d.transposed && !sep && !o.Sigmoid && rowWiseScores
	if rowWise {
		d.bestClasses(v)
	}
	for i := 0; i < d.boxes; i++ {
		best, score := -1, float32(0)
		if rowWise {
			best, score = int(d.best[i]), d.score[i]
		}
		for c := 0; c < d.classes && !rowWise; c++ {
			var x float32
			if sep {
				x = s[i*d.classes+c]
			} else {
				x = d.at(s, i, d.clsOff+c)
			}
			if o.Sigmoid {
				x = sigmoid(x)
			}
			if x > score {
				best, score = c, x
			}
		}
		if d.format == FormatYOLOv5 {
			score *= d.at(v, i, 4) // objectness
		}
		if best < 0 || score < o.ScoreThreshold || score != score {
			continue
		}
		cx, cy, w, h := d.at(v, i, 0)*d.scaleX, d.at(v, i, 1)*d.scaleY, d.at(v, i, 2)*d.scaleX, d.at(v, i, 3)*d.scaleY
		d.cand = append(d.cand, cand{box: [4]float32{cx - w/2, cy - h/2, cx + w/2, cy + h/2}, score: score, class: best, row: i})
	}
}

// candEnd2End collects rows x1, y1, x2, y2, score, class of a model that
// made its own final selection; rows below the threshold are padding.
func (d *detector) candEnd2End(v []float32) {
	for i := 0; i < d.boxes; i++ {
		score, cls := d.at(v, i, 4), d.at(v, i, 5)
		if !(score >= d.opt.ScoreThreshold) || score <= 0 || !(cls >= 0) || cls > 1<<24 {
			continue
		}
		d.cand = append(d.cand, cand{box: [4]float32{d.at(v, i, 0), d.at(v, i, 1), d.at(v, i, 2), d.at(v, i, 3)},
			score: score, class: int(cls), row: i})
	}
}

// candEfficientNMS collects the first num[0] detections of the plugin's
// four outputs (boxes in corner form, as the plugin always writes them).
func (d *detector) candEfficientNMS(num, boxes, scores, classes []float32) {
	n := num[0]
	if !(n > 0) {
		return
	}
	for i := 0; i < min(int(n), d.boxes); i++ {
		score, cls := scores[i], classes[i]
		if !(score >= d.opt.ScoreThreshold) || !(cls >= 0) || cls > 1<<24 {
			continue
		}
		b := boxes[i*4 : i*4+4]
		d.cand = append(d.cand, cand{box: [4]float32{b[0], b[1], b[2], b[3]}, score: score, class: int(cls), row: i})
	}
}

// selectBoxes orders the candidates by score and keeps up to
// MaxDetections, suppressing a box that overlaps a better one of its
// class by more than IOUThreshold where the format has no NMS of its own.
func (d *detector) selectBoxes() {
	slices.SortStableFunc(d.cand, func(a, b cand) int { return cmp.Compare(b.score, a.score) })
	kept := d.cand[:0]
	for _, c := range d.cand {
		if len(kept) == d.opt.MaxDetections {
			break
		}
		keep := true
		if d.nms {
			for _, k := range kept {
				if k.class == c.class && iou(k.box, c.box) > d.opt.IOUThreshold {
					keep = false
					break
				}
			}
		}
		if keep {
			kept = append(kept, c)
		}
	}
	d.cand = kept
}

// finish writes the kept boxes, their labels and keypoints, mapped to
// source pixels (NMS ran in input pixels: the mapping scales and shifts,
// which leaves overlaps as they were).
func (d *detector) finish(v []float32, m Mapper) {
	kn := d.kpts * d.kdims
	for j, c := range d.cand {
		b := c.box
		if m != nil {
			b[0], b[1] = m.ToSource(b[0], b[1])
			b[2], b[3] = m.ToSource(b[2], b[3])
		}
		det := stream.Detection{Box: b, Class: c.class, Score: c.score}
		if c.class < len(d.opt.Labels) {
			det.Label = d.opt.Labels[c.class]
		}
		if kn > 0 {
			kp := d.kp[j*kn : (j+1)*kn]
			for k := 0; k < d.kpts; k++ {
				x, y := d.at(v, c.row, d.kptOff+k*d.kdims), d.at(v, c.row, d.kptOff+k*d.kdims+1)
				if m != nil {
					x, y = m.ToSource(x, y)
				}
				kp[k*d.kdims], kp[k*d.kdims+1] = x, y
				if d.kdims == 3 {
					kp[k*3+2] = d.at(v, c.row, d.kptOff+k*3+2)
				}
			}
			det.Keypoints = kp
		}
		d.dets = append(d.dets, det)
	}
}

func iou(a, b [4]float32) float32 {
	ix := min(a[2], b[2]) - max(a[0], b[0])
	iy := min(a[3], b[3]) - max(a[1], b[1])
	if ix <= 0 || iy <= 0 {
		return 0
	}
	inter := ix * iy
	union := (a[2]-a[0])*(a[3]-a[1]) + (b[2]-b[0])*(b[3]-b[1]) - inter
	if union <= 0 {
		return 0
	}
	return inter / union
}
