package onnxmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
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
	weights := func(name string, fanIn int, dims ...int64) tensor {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		a := math.Sqrt(6 / float64(fanIn))
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * a)
		}
		return tensor{name: name, dims: dims, floats: v}
	}
	bias := func(name string, n int64) tensor {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * 0.01)
		}
		return tensor{name: name, dims: []int64{n}, floats: v}
	}
	inits := []tensor{
		weights("conv1_w", 3*3*3, 16, 3, 3, 3), bias("conv1_b", 16),
		weights("conv2_w", 16*3*3, 32, 16, 3, 3), bias("conv2_b", 32),
		weights("fc_w", 32, Classes, 32), bias("fc_b", Classes),
	}
	conv := []attr{intsAttr("kernel_shape", 3, 3), intsAttr("strides", 2, 2), intsAttr("pads", 1, 1, 1, 1)}
	nodes := []node{
		{op: "Conv", name: "conv1", inputs: []string{InputName, "conv1_w", "conv1_b"}, attrs: conv},
		{op: "Relu", name: "relu1", inputs: []string{"conv1"}},
		{op: "Conv", name: "conv2", inputs: []string{"relu1", "conv2_w", "conv2_b"}, attrs: conv},
		{op: "Relu", name: "relu2", inputs: []string{"conv2"}},
		{op: "GlobalAveragePool", name: "pool", inputs: []string{"relu2"}},
		{op: "Flatten", name: "flat", inputs: []string{"pool"}, attrs: []attr{intAttr("axis", 1)}},
		{op: "Gemm", name: "logits", inputs: []string{"flat", "fc_w", "fc_b"}, attrs: []attr{intAttr("transB", 1)}},
		{op: "Softmax", name: OutputName, inputs: []string{"logits"}, attrs: []attr{intAttr("axis", 1)}},
	}
	var g msg
	for _, n := range nodes {
		g = g.bytes(graphNode, n.encode())
	}
	g = g.str(graphName, "edged_bench")
	for _, t := range inits {
		g = g.bytes(graphInitializer, t.encode())
	}
	g = g.bytes(graphInput, valueInfo(InputName, 1, 3, s, s))
	g = g.bytes(graphOutput, valueInfo(OutputName, 1, Classes))
	m := msg(nil).
		varint(modelIRVersion, 7).
		str(modelProducerName, "edged bench/internal/onnxmodel").
		str(modelDocString, fmt.Sprintf("edged benchmark classifier, seed %d", seed)).
		bytes(modelGraph, g).
		bytes(modelOpsetImport, msg(nil).str(opsetDomain, "").varint(opsetVersion, 13))
	return m, nil
}
