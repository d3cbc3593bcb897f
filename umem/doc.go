// Package umem owns every buffer that a device (camera DMA, GPU kernel,
// inference engine) reads or writes: CUDA managed, pinned and device memory
// bound at run time through the CUDA driver API, and page-aligned host memory
// for machines without CUDA.
//
// The driver is loaded on first use through internal/cuda, edged's one
// binding of the driver API (dlopen of the driver library); nothing of
// CUDA is needed to build, and a binary built without cgo, or run on a
// machine without an NVIDIA driver, reports [ErrNoCUDA] and uses host memory.
// CUDA status codes are [Result] values: errors that name the CUDA constant
// and match the package sentinels ([ErrOutOfMemory], [ErrContextLost],
// [ErrNoCUDA], [ErrNotSupported]) through errors.Is.
//
// # Placement
//
// [Open] opens a device and resolves the configured [Strategy]; auto picks
// per device and says why in [Placement.Reason]:
//
//   - integrated GPU with concurrentManagedAccess = 0 (Jetson Xavier, Orin):
//     managed memory allocated attach-HOST, attached to the pipeline stream
//     alone for GPU work and back to the host afterwards, never prefetched;
//   - integrated GPU with concurrentManagedAccess = 1 (Thor): managed memory,
//     prefetched to the GPU before GPU work and back after it;
//   - discrete GPU: pinned host slots copied asynchronously into a device
//     staging buffer;
//   - no CUDA: page-aligned host memory.
//
// [Placement.Alloc] allocates frame slots; an [Uploader] hands a filled
// slot to a [Stream] and returns the device address its kernels read.
//
// # Ownership
//
// A [Buffer] has exactly one owner at a time: the host (CPU code, V4L2
// capture) or one CUDA stream. [Mem.Attach] hands a CUDA buffer to a
// stream before GPU work and [Mem.Detach] hands it back after; Host
// returns the bytes only while the host owns the buffer, and
// [ErrOwnedByStream] otherwise, instead of letting the CPU fault on memory
// the GPU is using. The host regains a detached buffer once the stream has
// finished the work enqueued before the Detach. Where the
// concurrentManagedAccess = 0 rules apply, Host of a globally attached
// managed buffer also fails ([ErrGPUActive]) while any stream of the device
// has unfinished work. [DeviceOptions.Strict] applies those rules on any
// device, so the discipline is exercised on machines that do not need it.
// Buffers are released exactly once by their owner's caller; Release is
// idempotent, waits for a stream still using the buffer, and there are no
// finalizers.
//
// # Threads
//
// A CUDA context is current per OS thread. Every umem call makes the
// device's primary context current on the thread it runs on, inside the
// same cgo call, so umem is safe from any goroutine. Other CUDA libraries
// (TensorRT through cudart) use whatever context is current: run them on a
// [Worker], a goroutine locked to one OS thread with the primary context
// current.
//
// # Frame pool
//
// A [Pool] holds a fixed number of equally sized slots allocated at start-up.
// A slot is leased with [Pool.Get], shared with [Slot.Retain] and returned
// with [Slot.Release] when its last reference goes; a slot a stream still
// owns is reclaimed from the GPU first. [Pool.Stats] counts slots by state
// (free, capturing, ready, CPU, GPU) for metrics. Nothing on the per-frame
// path (lease, write, upload, kernel launch, hand-back, release) allocates
// on the Go heap.
//
// # Kernels
//
// [Device.Compile] compiles CUDA C with the machine's own NVRTC (dlopen of
// libnvrtc.so.13, .12 or .11.2) for the exact device architecture and
// caches the PTX on disk, keyed by the source, flags, architecture and
// driver version; [Device.LoadModule] loads it and [Kernel.Launch] runs it
// with arguments packed in a reusable [Args].
//
// # Jetson notes
//
// On Xavier and Orin the integrated GPU reports concurrentManagedAccess = 0:
// the CPU must not touch any managed allocation while any kernel runs, and
// prefetching to the GPU is not supported. The managed strategy therefore
// allocates attach-HOST, attaches buffers to a single stream for GPU work
// (cuStreamAttachMemAsync SINGLE) and back to the host (HOST) after it, and
// never prefetches there. Work must be issued on umem streams (TensorRT
// enqueues on [Stream.Handle]) for umem to see it. GPU memory is system
// DRAM: [Probe.MemAvailable] reports /proc/meminfo MemAvailable.
package umem
