package trt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/edged-dev/edged/umem"
)

// Errors returned by backends and the reload machinery. Each rejection
// wraps one of them so callers can count reloads by reason.
var (
	ErrEngineInvalid = errors.New("trt: invalid model file")
	ErrVersion       = errors.New("trt: engine built by another TensorRT version")
	ErrSignature     = errors.New("trt: tensor signature does not match the pipeline")
	ErrWarmup        = errors.New("trt: warm-up inference failed")
	ErrMemory        = errors.New("trt: not enough memory")
	ErrTooLarge      = errors.New("trt: model file too large")
	ErrBackend       = errors.New("trt: backend unavailable")
	ErrClosed        = errors.New("trt: engine closed")
)

// DefaultMaxBytes is the default ceiling of a model file: 1 GiB.
// The largest engines that run on a Jetson are a few hundred MiB
// (YOLOv8x FP32: about 270 MiB as ONNX or as a TensorRT plan), and a
// reload of a 1 GiB file needs about 3 GiB at its peak (the bytes
// read, plus twice that for staging, see reload.MemInfoBudget), which an
// 8 GiB Jetson can still give while serving; the memory budget
// refuses it first on smaller ones.
const DefaultMaxBytes = 1 << 30

// DataType is a tensor element type.
type DataType int

// Element types.
const (
	Float32 DataType = iota
	Float16
	Int8
	Uint8
	Int32
	Int64
	Bool
)

var dtypeNames = [...]string{"float32", "float16", "int8", "uint8", "int32", "int64", "bool"}
var dtypeSizes = [...]int{4, 2, 1, 1, 4, 8, 1}

func (d DataType) String() string {
	if d >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DataType(%d)", int(d))
}

// Size is the element size in bytes.
func (d DataType) Size() int {
	if d >= 0 && int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// TensorSpec names a tensor and its shape; -1 marks a dynamic dimension.
type TensorSpec struct {
	Name  string
	Type  DataType
	Shape []int64
}

// Elements is the number of elements, or -1 for a dynamic shape. It
// saturates at math.MaxInt64: a model may declare dimensions whose product
// does not fit, and no allocation of that size can succeed.
func (s TensorSpec) Elements() int64 {
	n := int64(1)
	for _, d := range s.Shape {
		if d < 0 {
			return -1
		}
		if d > 0 && n > math.MaxInt64/d {
			n = math.MaxInt64
			continue
		}
		n *= d
	}
	return n
}

// Bytes is the size of the tensor in bytes, or -1 for a dynamic shape
// (saturating, as Elements).
func (s TensorSpec) Bytes() int64 {
	n := s.Elements()
	if n < 0 {
		return -1
	}
	if sz := int64(s.Type.Size()); sz > 0 && n > math.MaxInt64/sz {
		return math.MaxInt64
	}
	return n * int64(s.Type.Size())
}

func (s TensorSpec) String() string {
	dims := make([]string, len(s.Shape))
	for i, d := range s.Shape {
		if d < 0 {
			dims[i] = "?"
		} else {
			dims[i] = fmt.Sprint(d)
		}
	}
	return fmt.Sprintf("%s:%s[%s]", s.Name, s.Type, strings.Join(dims, ","))
}

// Equal reports whether two specs have the same name, type and shape.
func (s TensorSpec) Equal(o TensorSpec) bool {
	if s.Name != o.Name || s.Type != o.Type || len(s.Shape) != len(o.Shape) {
		return false
	}
	for i := range s.Shape {
		if s.Shape[i] != o.Shape[i] {
			return false
		}
	}
	return true
}

// Tensor is an engine input or output with resolved (static) shape and the
// memory that holds it.
type Tensor struct {
	TensorSpec
	Buf umem.Buffer
}

// Float32 returns the host view of a float32 tensor, or nil when the tensor
// is of another type or its memory is not host-accessible right now.
func (t *Tensor) Float32() []float32 {
	if t.Type != Float32 || t.Buf == nil {
		return nil
	}
	b, err := t.Buf.Host()
	if err != nil || len(b) < 4 {
		return nil
	}
	n := int(t.Elements())
	if n < 0 || n*4 > len(b) {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

// Signature is the ordered list of an engine's inputs and outputs.
type Signature struct {
	Inputs, Outputs []TensorSpec
}

// Check reports how s differs from want (the signature of the engine a
// pipeline was built for), wrapping ErrSignature.
func (s Signature) Check(want Signature) error {
	var errs []error
	cmp := func(kind string, got, want []TensorSpec) {
		if len(got) != len(want) {
			errs = append(errs, fmt.Errorf("%d %ss, the pipeline has %d", len(got), kind, len(want)))
			return
		}
		for i := range got {
			if !got[i].Equal(want[i]) {
				errs = append(errs, fmt.Errorf("%s %d is %s, the pipeline has %s", kind, i, got[i], want[i]))
			}
		}
	}
	cmp("input", s.Inputs, want.Inputs)
	cmp("output", s.Outputs, want.Outputs)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrSignature, errors.Join(errs...))
}

// Engine is one loaded model bound to its own tensors.
//
// Infer reads the inputs and writes the outputs; the caller fills Inputs()
// before and reads Outputs() after. An engine is used by one goroutine at a
// time. Close releases everything and is idempotent.
type Engine interface {
	Backend() string
	Inputs() []*Tensor
	Outputs() []*Tensor
	Infer(ctx context.Context) error
	Close() error
}

// SignatureOf returns the resolved tensor signature of an engine. A
// Batched engine's is that of its largest batch, whatever SetBatch chose
// last: what the engine is, not what its next inference runs.
func SignatureOf(e Engine) Signature {
	var s Signature
	top := 0
	if b, ok := e.(Batched); ok && b.MaxBatch() > 0 {
		top, _ = b.BatchDim().Fits(b.MaxBatch())
	}
	spec := func(t *Tensor) TensorSpec {
		if top == 0 || len(t.Shape) == 0 || t.Shape[0] == int64(top) {
			return t.TensorSpec
		}
		c := t.TensorSpec
		c.Shape = append([]int64(nil), t.Shape...)
		c.Shape[0] = int64(top)
		return c
	}
	for _, t := range e.Inputs() {
		s.Inputs = append(s.Inputs, spec(t))
	}
	for _, t := range e.Outputs() {
		s.Outputs = append(s.Outputs, spec(t))
	}
	return s
}

// LoadOptions configure a backend load.
type LoadOptions struct {
	// Name is the model name used in messages.
	Name string
	// Alloc provides the tensors' memory.
	Alloc umem.Allocator
	// Shapes fixes dynamic input dimensions, by input name.
	Shapes map[string][]int64
	// Image fixes the dynamic dimensions of the image input (one not in
	// Shapes) from the size preprocessing produces; nil: none.
	Image *ImageShape
	// Threads bounds CPU threads of CPU backends; 0 picks the backend default.
	Threads int
	// Want, when it has inputs, is the signature the engine must have (a
	// reload's: the pipeline's). A backend that reads the model's inputs
	// before it allocates them refuses other inputs with ErrSignature
	// then, so a replacement declaring a huge input costs no allocation.
	// reload.Stage sets it from its want.
	Want Signature
	// Batch, when positive, loads a Batched engine for up to Batch frames
	// per inference: axis 0 of every input and output is the batch (a
	// dynamic one resolved to Batch, a fixed one at least Batch), and the
	// tensors are allocated once for the largest batch. 0: one frame, a
	// dynamic batch dimension resolved to 1, as before.
	Batch int
}

// Backend loads engines of one kind from the bytes of a model file.
type Backend interface {
	Name() string
	Load(ctx context.Context, model []byte, opts LoadOptions) (Engine, error)
}

func (s Signature) String() string {
	var b strings.Builder
	b.WriteString("in(")
	for i, t := range s.Inputs {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(t.String())
	}
	b.WriteString(") out(")
	for i, t := range s.Outputs {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(t.String())
	}
	b.WriteString(")")
	return b.String()
}

// ImageShape is the image size a pipeline feeds an engine whose image
// input has dynamic dimensions (e.g. an ONNX export with [1,3,?,?] or
// [?,?,?,3]), from preprocess.width, height, input and layout.
type ImageShape struct {
	Input         string // the input's name; "" = the engine's first input
	Height, Width int64
	Layout        string // "nchw", "nhwc", or "" / "auto": from the model's fixed dimensions
}

// Resolve returns the full shape of input name (the engine's first input
// when first) declared with dims (negative = dynamic), or nil when s does
// not apply: another input, not 4-D, or nothing dynamic. A dynamic batch
// is 1, a dynamic channel count 3, and a batch or channel count the model
// fixes is kept; the channel axis is where the layout says, else axis 3
// when only it is fixed to 1 or 3, else axis 1. Height and width are
// always s's, so the backend's own check reports a size the model fixes
// otherwise.
func (s *ImageShape) Resolve(name string, first bool, dims []int64) []int64 {
	if s == nil || len(dims) != 4 || (s.Input != name && (s.Input != "" || !first)) {
		return nil
	}
	dynamic := false
	for _, d := range dims {
		dynamic = dynamic || d < 0
	}
	if !dynamic {
		return nil
	}
	isC := func(d int64) bool { return d == 1 || d == 3 }
	nhwc := s.Layout == "nhwc" || (s.Layout != "nchw" && isC(dims[3]) && !isC(dims[1]))
	pick := func(d, v int64) int64 {
		if d >= 0 {
			return d
		}
		return v
	}
	if nhwc {
		return []int64{pick(dims[0], 1), s.Height, s.Width, pick(dims[3], 3)}
	}
	return []int64{pick(dims[0], 1), pick(dims[1], 3), s.Height, s.Width}
}

// Sharer is implemented by engines whose loaded model can serve more than
// one user: the weights are loaded and validated once (an ONNX Runtime
// session, a TensorRT ICudaEngine), and each user gets an engine of its
// own from Share, with its own tensors (shaped and allocated by opts:
// Image, Shapes, Alloc; Name and Threads are the model's) and its own
// execution state (an I/O binding, an execution context and stream). Each
// engine is still used by one goroutine at a time; engines sharing a model
// may Infer at the same time. Closing one closes only its own tensors and
// state; the model is freed when the last engine sharing it is closed, the
// one Share was called on included, so Share may be called on any of them
// while it is open.
type Sharer interface {
	Share(ctx context.Context, opts LoadOptions) (Engine, error)
	// Weights identifies the loaded model: engines sharing it return the
	// same value (comparable), engines loaded separately different ones.
	Weights() any
}

// SameWeights reports whether engines a and b share one loaded model.
func SameWeights(a, b Engine) bool {
	sa, ok := a.(Sharer)
	if !ok {
		return a == b
	}
	sb, ok := b.(Sharer)
	return ok && sa.Weights() == sb.Weights()
}
