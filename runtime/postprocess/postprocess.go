package postprocess

import (
	"errors"
	"fmt"
	"math"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt"
)

// Kinds.
const (
	Raw        = "raw"
	TopK       = "topk"
	Detections = "detections"
	Keypoints  = "keypoints"
)

// Detector output formats (Options.Format; "" is YOLOv8). Auto is
// resolved by Choose, never given to New.
const (
	FormatAuto         = "auto"
	FormatYOLOv8       = "yolov8"       // [1, 4+C(+extra), N] or [1, N, 4+C]: cx, cy, w, h, class scores
	FormatYOLOv5       = "yolov5"       // [1, N, 5+C]: cx, cy, w, h, objectness, class scores
	FormatEnd2End      = "end2end"      // [1, N, 6(+extra)]: x1, y1, x2, y2, score, class; no NMS
	FormatEfficientNMS = "efficientnms" // num_dets [1,1], boxes [1,K,4], scores [1,K], classes [1,K]
	FormatRTDETR       = "rtdetr"       // [1, N, 4+C] or boxes [1,N,4] + scores [1,N,C]; normalised cx, cy, w, h
)

// Formats lists every format name a configuration may give.
var Formats = []string{FormatAuto, FormatYOLOv8, FormatYOLOv5, FormatEnd2End, FormatEfficientNMS, FormatRTDETR}

// Errors of New and Choose: the output's shape does not suit the kind or
// format, the labels do not match its classes, or the format cannot be
// told from the shapes.
var (
	ErrShape     = errors.New("postprocess: unsuitable shape")
	ErrLabels    = errors.New("postprocess: wrong number of labels")
	ErrAmbiguous = errors.New("postprocess: the output format is ambiguous")
)

// Options configure one processor.
type Options struct {
	// Name names the result; "" is the first output read.
	Name           string
	Kind           string
	K              int
	Softmax        bool
	Labels         []string
	MaxValues      int
	ScoreThreshold float32
	IOUThreshold   float32
	MaxDetections  int

	// Format is the detector format of detections and keypoints ("" =
	// YOLOv8); Choose picks it for "auto".
	Format string
	// Classes is the number of class scores per box when known (0: all
	// the columns the format leaves); Extra columns after them are
	// skipped (a segmentation model's mask coefficients).
	Classes, Extra int
	// KeypointCount and KeypointDims describe a keypoints output's
	// keypoints per box (x, y and, with 3, a score).
	KeypointCount, KeypointDims int
	// Sigmoid applies the logistic function to class scores first (for
	// detectors that output logits, as some RT-DETR exports do).
	Sigmoid bool
	// InputW and InputH are the engine input's size in pixels: RT-DETR
	// boxes are fractions of it.
	InputW, InputH int
}

// Mapper maps tensor pixel coordinates back to source image pixels.
type Mapper interface {
	ToSource(x, y float32) (float32, float32)
}

// input is one tensor a processor reads, with the buffer its values are
// converted into when they are not float32.
type input struct {
	spec    trt.TensorSpec
	scratch []float32
}

// values returns t's elements as float32: the host view itself for a
// float32 tensor, else converted into the scratch buffer. nil when the
// memory cannot be read now.
func (in *input) values(t *trt.Tensor) []float32 {
	if t == nil {
		return nil
	}
	if t.Type == trt.Float32 {
		return t.Float32()
	}
	return t.ReadFloat32(in.scratch)
}

// Processor post-processes one output (or, for EfficientNMS and two-output
// RT-DETR, the few outputs of one detector) with fixed shapes. Each owns
// the slices it fills, so steady-state frames allocate nothing.
type Processor struct {
	name  string
	shape []int64
	opt   Options
	ins   []input

	data  []float32
	order []int
	cls   []stream.Class
	det   *detector
}

// New returns a processor for the outputs in (one, except for the
// multi-output detector formats, in the format's order: see Choose). The
// result is named after in[0].
func New(in []trt.TensorSpec, o Options) (*Processor, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: no output to post-process", ErrShape)
	}
	p := &Processor{name: in[0].Name, shape: append([]int64(nil), in[0].Shape...), opt: o}
	if o.Name != "" {
		p.name = o.Name
		for _, s := range in {
			if s.Name == o.Name {
				p.shape = append([]int64(nil), s.Shape...)
			}
		}
	}
	for _, s := range in {
		n := s.Elements()
		if n <= 0 {
			return nil, fmt.Errorf("%w: output %q has dynamic shape %v", ErrShape, s.Name, s.Shape)
		}
		if s.Type.Size() == 0 {
			return nil, fmt.Errorf("%w: output %q has element type %s, which post-processing does not read", ErrShape, s.Name, s.Type)
		}
		in := input{spec: s}
		if s.Type != trt.Float32 {
			in.scratch = make([]float32, n)
		}
		p.ins = append(p.ins, in)
	}
	if len(in) > 1 && o.Kind != Detections && o.Kind != Keypoints {
		return nil, fmt.Errorf("%w: %s post-processes one output, not %d", ErrShape, o.Kind, len(in))
	}
	n := int(in[0].Elements())
	switch o.Kind {
	case Raw, "":
		p.opt.Kind = Raw
		if p.opt.MaxValues <= 0 {
			p.opt.MaxValues = 1024
		}
		p.data = make([]float32, 0, min(n, p.opt.MaxValues))
	case TopK:
		if o.K <= 0 {
			p.opt.K = 1
		}
		p.opt.K = min(p.opt.K, n)
		p.order = make([]int, n)
		p.data = make([]float32, n)
		p.cls = make([]stream.Class, 0, p.opt.K)
		if len(o.Labels) > 0 && len(o.Labels) != n {
			return nil, fmt.Errorf("%w: output %q has %d classes but %d labels are configured", ErrLabels, p.name, n, len(o.Labels))
		}
	case Detections, Keypoints:
		d, err := newDetector(in, &p.opt)
		if err != nil {
			return nil, err
		}
		p.det = d
	default:
		return nil, fmt.Errorf("postprocess: unknown kind %q", o.Kind)
	}
	return p, nil
}

// Name is the result's name: Options.Name, else the first output it reads.
func (p *Processor) Name() string { return p.name }

// Inputs are the outputs it reads, in order.
func (p *Processor) Inputs() []string {
	names := make([]string, len(p.ins))
	for i, in := range p.ins {
		names[i] = in.spec.Name
	}
	return names
}

// Run fills out from the tensors ts (the outputs named by Inputs, in that
// order). The returned output's slices are owned by the processor and
// valid until the next Run. A tensor the CPU cannot read now gives an
// output with no values.
func (p *Processor) Run(ts []*trt.Tensor, m Mapper, out *stream.Output) {
	out.Name = p.name
	out.Shape = p.shape
	out.DType = ""
	out.Data, out.Classes, out.Detections, out.Truncated, out.KeypointDims = nil, nil, nil, false, 0
	var v []float32
	if len(ts) > 0 && len(p.ins) > 0 {
		v = p.ins[0].values(ts[0])
	}
	switch p.opt.Kind {
	case Raw:
		out.Kind = stream.OutputRaw
		if t := p.ins[0].spec.Type; t != trt.Float32 {
			out.DType = t.String()
		}
		n := min(len(v), p.opt.MaxValues)
		p.data = append(p.data[:0], v[:n]...)
		out.Data = p.data
		out.Truncated = n < len(v)
	case TopK:
		out.Kind = stream.OutputClasses
		out.Classes = p.topk(v)
	case Detections, Keypoints:
		out.Kind = stream.OutputDetections
		out.Detections = p.det.run(p.ins, ts, m)
		out.KeypointDims = p.det.kdims
	}
}

func (p *Processor) topk(v []float32) []stream.Class {
	p.cls = p.cls[:0]
	if len(v) != len(p.data) {
		return p.cls
	}
	s := p.data
	copy(s, v)
	if p.opt.Softmax {
		softmax(s)
	}
	// Partial selection: k is small.
	idx := p.order[:len(s)]
	for i := range idx {
		idx[i] = i
	}
	k := p.opt.K
	for i := 0; i < k; i++ {
		best := i
		for j := i + 1; j < len(idx); j++ {
			if greater(s[idx[j]], s[idx[best]]) {
				best = j
			}
		}
		idx[i], idx[best] = idx[best], idx[i]
	}
	for _, i := range idx[:k] {
		c := stream.Class{Index: i, Score: s[i]}
		if i < len(p.opt.Labels) {
			c.Label = p.opt.Labels[i]
		}
		p.cls = append(p.cls, c)
	}
	return p.cls
}

// greater orders NaN last.
func greater(a, b float32) bool {
	if a != a {
		return false
	}
	return b != b || a > b
}

func softmax(s []float32) {
	m := float32(math.Inf(-1))
	for _, v := range s {
		if v > m {
			m = v
		}
	}
	var sum float64
	for i, v := range s {
		e := math.Exp(float64(v - m))
		s[i] = float32(e)
		sum += e
	}
	for i := range s {
		s[i] = float32(float64(s[i]) / sum)
	}
}
