// Package onnxmodel writes the benchmark model: a small image classifier
// with seeded weights, as ONNX (opset 13), written by hand like
// trt/demomodel so it needs no protobuf or ONNX library.
//
//	input  float32 [1,3,S,S]  (S = 224 by default)
//	Conv 3->16 k3 s2 p1, Relu, Conv 16->32 k3 s2 p1, Relu,
//	GlobalAveragePool, Flatten, Gemm 32->1000, Softmax
//	probs  float32 [1,1000]
//
// With Options.DynamicBatch the 1 of both is the symbolic "batch".
//
// About 20 M multiply-adds at 224x224: inference is short next to
// preprocessing a 1080p frame, so the harness sees the overhead around it.
package onnxmodel
