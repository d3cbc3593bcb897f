// Package onnxproto writes the few ONNX protobuf messages edged builds
// itself: the built-in demo model (trt/demomodel) and the benchmark
// classifier (bench/internal/onnxmodel). Field numbers are those of
// onnx/onnx.proto (IR version 7 and later). It writes; it never parses.
package onnxproto
