package demomodel

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/edged-dev/edged/internal/demoscene"
	pb "github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/trt"
)

//go:generate go run ./gen -o demo.onnx

// Default is the built-in demo model, Build(Options{}), as committed in
// demo.onnx. Configuration path "builtin:demo" selects it.
//
//go:embed demo.onnx
var Default []byte

// Names and sizes of the demo model's tensors.
const (
	InputName      = "image"    // default input name
	ClassOutput    = "class"    // float32 [1,Classes]
	CentroidOutput = "centroid" // float32 [1,2]
	Size           = 64         // default input width and height
	Classes        = len(demoscene.Palette)
	MaxSize        = 4096 // largest InputSize accepted
	MaxVariant     = Classes - 1

	// Threshold separates the square from the background: a pixel whose
	// darkest channel (in [0,1]) is above it belongs to the square.
	Threshold = 0.75
	// Temperature scales the class logits T*(2*m·c - |c|²).
	Temperature = 20
	// Epsilon is added to pixel counts so an empty mask gives finite means.
	Epsilon = 1e-6
)

// Labels names the classes in index order (the palette's colour names).
var Labels = demoscene.Labels

// ErrOptions is returned by Build for options it cannot honour.
var ErrOptions = errors.New("demomodel: invalid options")

// Options select a variant of the demo model. The zero value is the
// built-in model.
type Options struct {
	// Permutation n in 0..7 makes the model report class (background+n) mod
	// 8, so variants give verifiably different results (hot-reload demos
	// and tests). 0 is the built-in model.
	Permutation int
	// InputSize is the input width and height; 0 means 64.
	InputSize int
	// InputName names the input tensor; "" means "image".
	InputName string
	// NaN makes every output NaN (a model a reload must reject).
	NaN bool
	// DynamicBatch leaves the batch dimension of the input and outputs
	// dynamic ("batch"), for testing shape resolution in backends.
	DynamicBatch bool
	// SlowLoad n > 0 adds a subgraph of constants that ONNX Runtime
	// folds when it loads the model: a SlowLoadSize² matrix expanded
	// from one number, multiplied by itself n times; its mean, times 0,
	// is added to the logits, so the results do not change. The file
	// stays small (under 3 KB) while its load takes time in proportion
	// to n: a model that is slow to load, for tests of what waits on a
	// load.
	SlowLoad int
}

// SlowLoadSize is the side of the matrices of Options.SlowLoad.
const SlowLoadSize = 1024

func (o Options) size() int {
	if o.InputSize == 0 {
		return Size
	}
	return o.InputSize
}

// batch is the batch dimension: 1, or -1 (dynamic).
func (o Options) batch() int64 {
	if o.DynamicBatch {
		return -1
	}
	return 1
}

func (o Options) inputName() string {
	if o.InputName == "" {
		return InputName
	}
	return o.InputName
}

// Signature is the tensor signature of the model Build(o) returns.
func (o Options) Signature() trt.Signature {
	s := int64(o.size())
	n := o.batch()
	return trt.Signature{
		Inputs: []trt.TensorSpec{{Name: o.inputName(), Type: trt.Float32, Shape: []int64{n, 3, s, s}}},
		Outputs: []trt.TensorSpec{
			{Name: ClassOutput, Type: trt.Float32, Shape: []int64{n, int64(Classes)}},
			{Name: CentroidOutput, Type: trt.Float32, Shape: []int64{n, 2}},
		},
	}
}

// Names of the graph's intermediate values and constants; the input name
// must differ from all of them.
var internalNames = []string{
	"darkest", "is_square", "square_mask", "bg_mask", "bg_pixels", "bg_sum",
	"bg_count", "bg_count_eps", "bg_mean", "scores", "logits", "wx", "wy",
	"sum_x", "sum_y", "sq_count", "sq_count_eps", "sum_xy",
	"threshold", "one", "epsilon", "axes_hw", "palette_weights", "palette_bias",
	"grid_x", "grid_y", ClassOutput, CentroidOutput,
}

// Validate reports options Build cannot honour, wrapping ErrOptions.
func (o Options) Validate() error {
	var errs []error
	if o.Permutation < 0 || o.Permutation > MaxVariant {
		errs = append(errs, fmt.Errorf("variant %d is out of range 0..%d", o.Permutation, MaxVariant))
	}
	if o.InputSize < 0 || o.InputSize > MaxSize {
		errs = append(errs, fmt.Errorf("input size %d is out of range 1..%d", o.InputSize, MaxSize))
	}
	if !utf8.ValidString(o.InputName) || strings.ContainsRune(o.InputName, 0) {
		errs = append(errs, fmt.Errorf("input name %q must be UTF-8 without NUL bytes", o.InputName))
	}
	for _, n := range internalNames {
		if o.InputName == n {
			errs = append(errs, fmt.Errorf("input name %q is used inside the graph; pick another", n))
		}
	}
	if o.SlowLoad < 0 {
		errs = append(errs, fmt.Errorf("slow load %d is negative", o.SlowLoad))
	}
	if o.SlowLoad > 0 && strings.HasPrefix(o.InputName, "slow_") {
		errs = append(errs, fmt.Errorf("input name %q: names starting with slow_ are used inside the graph of a slow-load model", o.InputName))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
}

// Variant returns the demo model whose class output is permuted by n
// (0..7): it reports class (background+n) mod 8. Variant(0) equals Default.
func Variant(n int) ([]byte, error) { return Build(Options{Permutation: n}) }

// Expected is the class index that variant reports for a frame whose
// background is palette entry bg.
func Expected(bg, variant int) int {
	return ((bg+variant)%Classes + Classes) % Classes
}

// Build returns the ONNX model for o. The output depends only on o: the
// same options always give the same bytes.
func Build(o Options) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := int64(o.size())
	in := o.inputName()

	eps := float32(Epsilon)
	if o.NaN {
		eps = float32(math.NaN())
	}
	w, b := paletteWeights(o.Permutation)
	gx := make([]float32, s)
	for i := range gx {
		gx[i] = (float32(i) + 0.5) / float32(s)
	}
	consts := []pb.Tensor{
		{Name: "threshold", Floats: []float32{Threshold}},
		{Name: "one", Floats: []float32{1}},
		{Name: "epsilon", Floats: []float32{eps}},
		{Name: "axes_hw", Dims: []int64{2}, Ints: []int64{2, 3}},
		{Name: "palette_weights", Dims: []int64{3, int64(Classes)}, Floats: w},
		{Name: "palette_bias", Dims: []int64{int64(Classes)}, Floats: b},
		{Name: "grid_x", Dims: []int64{1, 1, 1, s}, Floats: gx},
		{Name: "grid_y", Dims: []int64{1, 1, s, 1}, Floats: gx},
	}
	n := func(op, out string, ins []string, attrs ...pb.Attr) pb.Node {
		return pb.Node{Op: op, Name: out, Inputs: ins, Outputs: []string{out}, Attrs: attrs}
	}
	sum := func(out, x string) pb.Node {
		return n("ReduceSum", out, []string{x, "axes_hw"}, pb.IntAttr("keepdims", 0))
	}
	nodes := []pb.Node{
		// Square mask: darkest channel above the threshold.
		n("ReduceMin", "darkest", []string{in}, pb.IntsAttr("axes", 1), pb.IntAttr("keepdims", 1)),
		n("Greater", "is_square", []string{"darkest", "threshold"}),
		n("Cast", "square_mask", []string{"is_square"}, pb.IntAttr("to", pb.DTFloat)),
		n("Sub", "bg_mask", []string{"one", "square_mask"}),
		// Class: softmax of T*(2*m·c - |c|²) over the palette, m the mean
		// background colour.
		n("Mul", "bg_pixels", []string{in, "bg_mask"}),
		sum("bg_sum", "bg_pixels"),
		sum("bg_count", "bg_mask"),
		n("Add", "bg_count_eps", []string{"bg_count", "epsilon"}),
		n("Div", "bg_mean", []string{"bg_sum", "bg_count_eps"}),
		n("MatMul", "scores", []string{"bg_mean", "palette_weights"}),
		n("Add", "logits", []string{"scores", "palette_bias"}),
		n("Softmax", ClassOutput, []string{"logits"}, pb.IntAttr("axis", 1)),
		// Centroid: mask-weighted mean of the pixel centres.
		n("Mul", "wx", []string{"square_mask", "grid_x"}),
		n("Mul", "wy", []string{"square_mask", "grid_y"}),
		sum("sum_x", "wx"),
		sum("sum_y", "wy"),
		sum("sq_count", "square_mask"),
		n("Add", "sq_count_eps", []string{"sq_count", "epsilon"}),
		n("Concat", "sum_xy", []string{"sum_x", "sum_y"}, pb.IntAttr("axis", 1)),
		n("Div", CentroidOutput, []string{"sum_xy", "sq_count_eps"}),
	}

	if o.SlowLoad > 0 {
		consts, nodes = slowLoad(o.SlowLoad, consts, nodes)
	}

	var g pb.Msg
	for _, nd := range nodes {
		g = g.Bytes(pb.GraphNode, nd.Encode())
	}
	g = g.Str(pb.GraphName, "edged_demo")
	for _, c := range consts {
		g = g.Bytes(pb.GraphInitializer, c.Encode())
	}
	g = g.Str(pb.GraphDocString, "class: background palette index; centroid: (x, y) of the white square in [0,1]")
	g = g.Bytes(pb.GraphInput, pb.ValueInfo(in, o.batch(), 3, s, s))
	g = g.Bytes(pb.GraphOutput, pb.ValueInfo(ClassOutput, o.batch(), int64(Classes)))
	g = g.Bytes(pb.GraphOutput, pb.ValueInfo(CentroidOutput, o.batch(), 2))

	m := pb.Msg(nil).
		Varint(pb.ModelIRVersion, irVersion).
		Str(pb.ModelProducerName, producerName).
		Str(pb.ModelProducerVersion, producerVersion).
		Str(pb.ModelDomain, "dev.edged").
		Varint(pb.ModelModelVersion, 1).
		Str(pb.ModelDocString, "edged built-in demo model; see trt/demomodel").
		Bytes(pb.ModelGraph, g).
		Bytes(pb.ModelOpsetImport, pb.Msg(nil).Str(pb.OpsetDomain, "").Varint(pb.OpsetVersion, opset)).
		Bytes(pb.ModelMetadataProps, pb.Entry("edged.labels", strings.Join(Labels[:], ","))).
		Bytes(pb.ModelMetadataProps, pb.Entry("edged.variant", strconv.Itoa(o.Permutation)))
	if o.NaN {
		m = m.Bytes(pb.ModelMetadataProps, pb.Entry("edged.nan", "true"))
	}
	return m, nil
}

// slowLoad adds Options.SlowLoad's subgraph: the logits go through
// logits + 0·mean(F^(k+1)), F the SlowLoadSize² matrix of 1/SlowLoadSize
// (so every power of it is F again: no overflow), all of it constants
// that ONNX Runtime's constant folding computes at load.
func slowLoad(k int, consts []pb.Tensor, nodes []pb.Node) ([]pb.Tensor, []pb.Node) {
	const side = SlowLoadSize
	consts = append(consts,
		pb.Tensor{Name: "slow_seed", Dims: []int64{1, 1}, Floats: []float32{1.0 / side}},
		pb.Tensor{Name: "slow_shape", Dims: []int64{2}, Ints: []int64{side, side}},
		pb.Tensor{Name: "slow_zero", Floats: []float32{0}},
	)
	node := func(op, out string, ins ...string) pb.Node {
		return pb.Node{Op: op, Name: out, Inputs: ins, Outputs: []string{out}}
	}
	slow := []pb.Node{node("Expand", "slow_0", "slow_seed", "slow_shape")}
	for i := 1; i <= k; i++ {
		slow = append(slow, node("MatMul", fmt.Sprintf("slow_%d", i), fmt.Sprintf("slow_%d", i-1), "slow_0"))
	}
	mean := node("ReduceMean", "slow_mean", fmt.Sprintf("slow_%d", k))
	mean.Attrs = []pb.Attr{pb.IntAttr("keepdims", 1)}
	slow = append(slow, mean, node("Mul", "slow_nothing", "slow_mean", "slow_zero"), node("Add", "slow_logits", "logits", "slow_nothing"))
	out := make([]pb.Node, 0, len(nodes)+len(slow))
	for _, nd := range nodes {
		if nd.Op == "Softmax" {
			out = append(out, slow...)
			nd.Inputs = []string{"slow_logits"}
		}
		out = append(out, nd)
	}
	return consts, out
}

// paletteWeights returns W [3,Classes] (row-major) and b [Classes] such that
// (m·W + b)[j] = T*(2*m·c_k - |c_k|²) for j = (k+perm) mod Classes, where
// c_k is palette entry k in [0,1].
func paletteWeights(perm int) (w, b []float32) {
	w = make([]float32, 3*Classes)
	b = make([]float32, Classes)
	for k, p := range demoscene.Palette {
		j := Expected(k, perm)
		c := [3]float32{float32(p.R) / 255, float32(p.G) / 255, float32(p.B) / 255}
		var n2 float32
		for ch := range c {
			w[ch*Classes+j] = 2 * Temperature * c[ch]
			n2 += c[ch] * c[ch]
		}
		b[j] = -Temperature * n2
	}
	return w, b
}
