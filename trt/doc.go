// Package trt runs inference engines and replaces them while they serve.
//
// An [Engine] is one loaded model with its own input and output tensors
// (allocated from umem, so a TensorRT engine can address them on the GPU and
// an ONNX Runtime engine reads them in place). Backends live in
// sub-packages: onnx (ONNX Runtime, loaded at run time) and tensorrt (a C++
// shim over libnvinfer, bound with dlopen, build tag "tensorrt").
//
// [Hot] holds the engine a pipeline is using. A frame leases the current
// generation, so a swap happens at a frame boundary: inferences in flight
// finish on the old engine, which is closed when its last lease ends.
// Reloads are transactions: a replacement is loaded off the hot path,
// checked against the pipeline's tensor signature, warmed up and only then
// swapped in; a failed reload leaves the old engine serving. [Stage] is
// that validation step, exported so that every engine is accepted the
// same way, whether a Reloader loads it or not.
package trt
