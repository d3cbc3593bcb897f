// Package onnxproto writes the few ONNX protobuf messages edged builds
// itself: the built-in demo model (trt/demomodel), the benchmark
// classifier (bench/internal/onnxmodel) and, with ConstModel, the test
// models whose outputs are fixed detector tensors of any element type.
// Field numbers are those of onnx/onnx.proto (IR version 7 and later).
//
// It reads one thing: ReadIO, a model's graph inputs and outputs (name,
// element type, dimensions) without its weights, for the memory check,
// which must know the tensors an engine will bind before it loads one.
package onnxproto
