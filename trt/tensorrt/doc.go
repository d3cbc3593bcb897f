// Package tensorrt runs TensorRT engine files through a small C++ shim over
// libnvinfer.
//
// The shim (shim.h, shim.cc) exposes opaque handles through an extern "C"
// header. It needs only two exported symbols of libnvinfer,
// createInferRuntime_INTERNAL and getInferLibVersion, which loader.c looks
// up with dlopen and dlsym (as trtexec does), so edged links and starts on
// machines without TensorRT and reports a clear error there. Everything else
// in TensorRT's runtime API is inline header code calling virtual methods.
//
// # Build
//
// The shim is compiled with the build tag "tensorrt" against the TensorRT
// headers of exactly one major version: the JetPack default
// /usr/include/aarch64-linux-gnu, or the folder in TENSORRT_INCLUDE passed
// through CGO_CXXFLAGS (make -C trt/tensorrt test does that). C++ objects of
// two majors cannot share a binary: both define the same nvinfer1 classes
// with different layouts (Dims is int32 in 8.x and int64 from 10), so an
// edged binary serves one major (8 for JetPack 5 and 6.0, 10 for JetPack
// 6.1+) and refuses a libnvinfer of another major by name. The #if
// NV_TENSORRT_MAJOR gates in shim.cc cover 8.5 to 11.1. Without the tag,
// [New] returns an error wrapping trt.ErrBackend that says so, and [Probe]
// still reports which libnvinfer the machine has.
//
// # Engines
//
// [Backend.Load] checks the file with package plan first (magic, header,
// building version against the loaded library, Ultralytics wrapper), then
// deserialises it, creates one execution context, selects optimisation
// profile 0 explicitly, fixes dynamic input shapes (trt.LoadOptions.Shapes,
// else the profile's opt shape), and binds every I/O tensor by name to a
// 256-byte aligned umem buffer from trt.LoadOptions.Alloc. [Engine.Share]
// (trt.Sharer) makes another Engine on the same ICudaEngine without
// deserialising it again: an execution context of its own, on its own
// stream, with profile 0 selected and its own shapes and tensors; the
// ICudaEngine is deleted after the last context made from it, so every
// pipeline of a model holds its weights once. With
// trt.LoadOptions.Batch the engine is a trt.Batched: the batch dimension
// (axis 0 of every input) is read from optimization profile 0 at load and
// a batch beyond its max (or a fixed dimension) is refused there with
// trt.ErrBatch; the tensors are bound once for the largest batch, and a
// batch of another size sets the input shapes (setInputShape) before the
// enqueueV3 that first runs it; batches below the profile's min run padded
// to it. Only linear
// (kLINEAR) device tensors of types edged knows are accepted; anything else
// is refused with the trtexec flags that fix it.
//
// # Plugins and DLA
//
// Engines with plugin layers need the library that registers each plugin
// before they are deserialised. [New] loads the model's custom plugin
// libraries ([Options.Plugins]; dlopen, never closed: they register from
// their static initialisers), then, once per process, TensorRT's standard
// plugins ([Options.StandardPlugins]: libnvinfer_plugin.so.<major> and its
// initLibNvInferPlugins, given a logger that lives as long as the process,
// since the plugin library keeps it). An engine whose plugin nobody
// registered fails with [ErrPlugin] naming it. With [Options.UseDLA] the
// runtime's DLA core is set (IRuntime::setDLACore) before any engine is
// deserialised, after checking the device has it ([ErrDLA] otherwise);
// [DLACores] asks TensorRT how many there are.
//
// # CUDA
//
// TensorRT is a CUDA runtime API library: it works in the context current on
// the calling OS thread. Every call into the shim runs inside [GPU.Do], on a
// thread where the device's primary context is current (umem.Worker), and
// each engine enqueues on its own stream from [GPU.NewStream], which Infer
// synchronises before returning. Streams that implement [Attacher] get the
// engine's buffers attached before the enqueue and detached after the
// synchronisation (managed memory on devices with concurrentManagedAccess =
// 0). [UmemGPU] wires umem's device and worker in.
//
// # Errors and logs
//
// TensorRT reports errors to an IErrorRecorder per handle and to a logger
// per backend. The shim returns both in the same call that failed, as the
// text of the Go error; nothing is kept in thread-local state. Log records
// at or above [Options.LogLevel] are kept in a bounded ring that the caller
// drains with [Backend.DrainLog] and logs; the oldest records are dropped and
// counted when it is full.
package tensorrt
