// Package onnx is the ONNX Runtime backend of trt: it loads .onnx models
// (and the built-in demo model) on CPU-only hosts and CI, and serves as a
// numeric reference for TensorRT results on the same inputs.
//
// The ONNX Runtime shared library is loaded at run time (through
// github.com/yalue/onnxruntime_go, which dlopens it), so edged builds
// without it. [FindLibrary] looks for it in the configured path,
// $EDGED_ONNXRUNTIME_LIB, next to the binary and in the system library
// paths. ONNX Runtime's environment is process-wide: the first [New] loads
// the library and every later [Backend] must name the same file.
//
// ONNX Runtime's telemetry is switched off before the library can
// initialise: importing this package sets ORT_DISABLE_TELEMETRY=1 in the
// process environment (overriding any other value), and [New] sets it
// again before loading the library and disables telemetry events after.
// ONNX Runtime is loaded only through this package (a repository test
// holds every other package to it).
//
// An engine's tensors are allocated from the load options' umem allocator
// and handed to ONNX Runtime in place: the session is bound to those
// buffers once, so Infer copies nothing and allocates nothing on the Go
// heap.
//
// With trt.LoadOptions.Batch the engine is a trt.Batched: axis 0 of every
// input is the batch, a symbolic one resolved to the batch (a fixed one
// must hold it: smaller batches then run padded), outputs must follow it;
// for each batch size an I/O binding over the first entries of the same
// buffers is made at load, so a batch of any size runs without allocating.
//
// The backend needs cgo on Linux; other builds get a stub whose New
// returns an error wrapping trt.ErrBackend.
package onnx
