package postprocess

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/edged-dev/edged/runtime/stream"
)

// Kinds.
const (
	Raw        = "raw"
	TopK       = "topk"
	Detections = "detections"
)

// Errors of New: the output's shape does not suit the kind, or the labels
// do not match its classes.
var (
	ErrShape  = errors.New("postprocess: unsuitable shape")
	ErrLabels = errors.New("postprocess: wrong number of labels")
)

// Options configure one output.
type Options struct {
	Kind           string
	K              int
	Softmax        bool
	Labels         []string
	MaxValues      int
	ScoreThreshold float32
	IOUThreshold   float32
	MaxDetections  int
}

// Mapper maps tensor pixel coordinates back to source image pixels.
type Mapper interface {
	ToSource(x, y float32) (float32, float32)
}

// Processor post-processes one named output with a fixed shape.
type Processor struct {
	name  string
	shape []int64
	opt   Options

	data  []float32
	order []int
	cls   []stream.Class
	cand  []stream.Detection
	dets  []stream.Detection
	// detection layout
	boxes, attrs int
	transposed   bool // [1, 4+C, N]
}

// New returns a processor for an output of the given shape.
func New(name string, shape []int64, o Options) (*Processor, error) {
	p := &Processor{name: name, shape: append([]int64(nil), shape...), opt: o}
	n := 1
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("%w: output %q has dynamic shape %v", ErrShape, name, shape)
		}
		n *= int(d)
	}
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
			return nil, fmt.Errorf("%w: output %q has %d classes but %d labels are configured", ErrLabels, name, n, len(o.Labels))
		}
	case Detections:
		if len(shape) != 3 || shape[0] != 1 {
			return nil, fmt.Errorf("%w: output %q has shape %v; detections need [1, 4+classes, boxes] or [1, boxes, 4+classes]", ErrShape, name, shape)
		}
		a, b := int(shape[1]), int(shape[2])
		p.transposed = a < b
		if p.transposed {
			p.attrs, p.boxes = a, b
		} else {
			p.boxes, p.attrs = a, b
		}
		if p.attrs < 5 {
			return nil, fmt.Errorf("%w: output %q has %d values per box; detections need 4 box values and at least one class score", ErrShape, name, p.attrs)
		}
		if len(o.Labels) > 0 && len(o.Labels) != p.attrs-4 {
			return nil, fmt.Errorf("%w: output %q has %d classes but %d labels are configured", ErrLabels, name, p.attrs-4, len(o.Labels))
		}
		if p.opt.MaxDetections <= 0 {
			p.opt.MaxDetections = 100
		}
		p.cand = make([]stream.Detection, 0, p.boxes)
		p.dets = make([]stream.Detection, 0, p.opt.MaxDetections)
	default:
		return nil, fmt.Errorf("postprocess: unknown kind %q", o.Kind)
	}
	return p, nil
}

// Name is the output's name.
func (p *Processor) Name() string { return p.name }

// Run fills out from the tensor values v. The returned output's slices are
// owned by the processor and valid until the next Run.
func (p *Processor) Run(v []float32, m Mapper, out *stream.Output) {
	out.Name = p.name
	out.Shape = p.shape
	out.Data, out.Classes, out.Detections, out.Truncated = nil, nil, nil, false
	switch p.opt.Kind {
	case Raw:
		out.Kind = stream.OutputRaw
		n := min(len(v), p.opt.MaxValues)
		p.data = append(p.data[:0], v[:n]...)
		out.Data = p.data
		out.Truncated = n < len(v)
	case TopK:
		out.Kind = stream.OutputClasses
		out.Classes = p.topk(v)
	case Detections:
		out.Kind = stream.OutputDetections
		out.Detections = p.detect(v, m)
	}
}

func (p *Processor) topk(v []float32) []stream.Class {
	s := p.data[:len(v)]
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
	p.cls = p.cls[:0]
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

func (p *Processor) detect(v []float32, m Mapper) []stream.Detection {
	get := func(box, attr int) float32 {
		if p.transposed {
			return v[attr*p.boxes+box]
		}
		return v[box*p.attrs+attr]
	}
	p.cand = p.cand[:0]
	for i := 0; i < p.boxes; i++ {
		best, score := -1, float32(0)
		for c := 4; c < p.attrs; c++ {
			if s := get(i, c); s > score {
				best, score = c-4, s
			}
		}
		if best < 0 || score < p.opt.ScoreThreshold {
			continue
		}
		cx, cy, w, h := get(i, 0), get(i, 1), get(i, 2), get(i, 3)
		x1, y1, x2, y2 := cx-w/2, cy-h/2, cx+w/2, cy+h/2
		if m != nil {
			x1, y1 = m.ToSource(x1, y1)
			x2, y2 = m.ToSource(x2, y2)
		}
		d := stream.Detection{Box: [4]float32{x1, y1, x2, y2}, Class: best, Score: score}
		if best < len(p.opt.Labels) {
			d.Label = p.opt.Labels[best]
		}
		p.cand = append(p.cand, d)
	}
	slices.SortStableFunc(p.cand, func(a, b stream.Detection) int { return cmp.Compare(b.Score, a.Score) })
	p.dets = p.dets[:0]
	for _, c := range p.cand {
		if len(p.dets) == p.opt.MaxDetections {
			break
		}
		keep := true
		for _, k := range p.dets {
			if k.Class == c.Class && iou(k.Box, c.Box) > p.opt.IOUThreshold {
				keep = false
				break
			}
		}
		if keep {
			p.dets = append(p.dets, c)
		}
	}
	return p.dets
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
