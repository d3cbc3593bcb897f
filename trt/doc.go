// Package trt is the engine contract: what a model loaded for inference
// is and how a pipeline uses it while it may be replaced.
//
// An [Engine] is one loaded model with its own input and output tensors
// (allocated from umem, so a TensorRT engine can address them on the GPU and
// an ONNX Runtime engine reads them in place), described by its
// [Signature]. A [Backend] loads engines; one that can tell a model file
// from its first bytes is a [Sniffer]. Backends live in sub-packages: onnx
// (ONNX Runtime, loaded at run time) and tensorrt (a C++ shim over
// libnvinfer, bound with dlopen, build tag "tensorrt"). The errors every
// rejection wraps (ErrEngineInvalid, ErrSignature, ...) and their names
// ([RejectReason]) are here, with the size limit of a model file
// ([DefaultMaxBytes]) and what a model file says about itself
// ([Metadata]).
//
// [Hot] holds the engine a pipeline is using. A frame leases the current
// generation, so a swap happens at a frame boundary: inferences in flight
// finish on the old engine, which is closed when its last lease ends.
// Replacing engines while they serve (watching the file, staging,
// validating, memory budgets) is the job of package trt/reload, the only
// part of trt that watches files.
package trt
