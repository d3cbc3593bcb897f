package onnxmodel

import (
	"fmt"
	"math"
	"math/rand/v2"

	pb "github.com/edged-dev/edged/internal/onnxproto"
)

// Tensor names and sizes.
const (
	InputName  = "input"
	OutputName = "probs"
	Classes    = 1000
	Size       = 224
)

// Options select the model; the zero value is Size and seed 1.
type Options struct {
	Size int    // input width and height; 0 = 224
	Seed uint64 // weights; the same seed gives the same bytes
	// DynamicBatch declares axis 0 of the input and the output as the
	// symbolic dimension "batch" instead of 1 (the weights are the same).
	DynamicBatch bool
	// Hidden > 0 puts a hidden layer of that width before the classifier
	// (32 → Hidden → Classes): Hidden × 1000 more weights (4096: 16 MiB),
	// for measuring what copies of a model's weights cost. 0: none, and
	// the bytes are those of earlier versions.
	Hidden int
}

// Build returns the ONNX model.
func Build(o Options) ([]byte, error) {
	s := int64(o.Size)
	if s == 0 {
		s = Size
	}
	if s < 8 || s > 4096 {
		return nil, fmt.Errorf("onnxmodel: input size %d out of range 8..4096", s)
	}
	seed := o.Seed
	if seed == 0 {
		seed = 1
	}
	rng := rand.New(rand.NewPCG(seed, 0x6564676564)) // "edged"
	// He-uniform weights (fan_in), small biases.
	weights := func(name string, fanIn int, dims ...int64) pb.Tensor {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		a := math.Sqrt(6 / float64(fanIn))
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * a)
		}
		return pb.Tensor{Name: name, Dims: dims, Floats: v}
	}
	bias := func(name string, n int64) pb.Tensor {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * 0.01)
		}
		return pb.Tensor{Name: name, Dims: []int64{n}, Floats: v}
	}
	inits := []pb.Tensor{
		weights("conv1_w", 3*3*3, 16, 3, 3, 3), bias("conv1_b", 16),
		weights("conv2_w", 16*3*3, 32, 16, 3, 3), bias("conv2_b", 32),
	}
	fcIn, fcFrom := 32, "flat"
	if o.Hidden > 0 {
		inits = append(inits, weights("hid_w", 32, int64(o.Hidden), 32), bias("hid_b", int64(o.Hidden)))
		fcIn, fcFrom = o.Hidden, "hidden"
	}
	inits = append(inits, weights("fc_w", fcIn, Classes, int64(fcIn)), bias("fc_b", Classes))
	conv := []pb.Attr{pb.IntsAttr("kernel_shape", 3, 3), pb.IntsAttr("strides", 2, 2), pb.IntsAttr("pads", 1, 1, 1, 1)}
	// Each node's one output has the node's name.
	n := func(op, name string, ins []string, attrs ...pb.Attr) pb.Node {
		return pb.Node{Op: op, Name: name, Inputs: ins, Outputs: []string{name}, Attrs: attrs}
	}
	nodes := []pb.Node{
		n("Conv", "conv1", []string{InputName, "conv1_w", "conv1_b"}, conv...),
		n("Relu", "relu1", []string{"conv1"}),
		n("Conv", "conv2", []string{"relu1", "conv2_w", "conv2_b"}, conv...),
		n("Relu", "relu2", []string{"conv2"}),
		n("GlobalAveragePool", "pool", []string{"relu2"}),
		n("Flatten", "flat", []string{"pool"}, pb.IntAttr("axis", 1)),
	}
	if o.Hidden > 0 {
		nodes = append(nodes, n("Gemm", "hid", []string{"flat", "hid_w", "hid_b"}, pb.IntAttr("transB", 1)), n("Relu", "hidden", []string{"hid"}))
	}
	nodes = append(nodes,
		n("Gemm", "logits", []string{fcFrom, "fc_w", "fc_b"}, pb.IntAttr("transB", 1)),
		n("Softmax", OutputName, []string{"logits"}, pb.IntAttr("axis", 1)),
	)
	var g pb.Msg
	for _, nd := range nodes {
		g = g.Bytes(pb.GraphNode, nd.Encode())
	}
	g = g.Str(pb.GraphName, "edged_bench")
	for _, t := range inits {
		g = g.Bytes(pb.GraphInitializer, t.Encode())
	}
	batch := int64(1)
	if o.DynamicBatch {
		batch = -1
	}
	g = g.Bytes(pb.GraphInput, pb.ValueInfo(InputName, batch, 3, s, s))
	g = g.Bytes(pb.GraphOutput, pb.ValueInfo(OutputName, batch, Classes))
	m := pb.Msg(nil).
		Varint(pb.ModelIRVersion, 7).
		Str(pb.ModelProducerName, "edged bench/internal/onnxmodel").
		Str(pb.ModelDocString, fmt.Sprintf("edged benchmark classifier, seed %d", seed)).
		Bytes(pb.ModelGraph, g).
		Bytes(pb.ModelOpsetImport, pb.Msg(nil).Str(pb.OpsetDomain, "").Varint(pb.OpsetVersion, 13))
	return m, nil
}
