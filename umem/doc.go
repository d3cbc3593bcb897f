// Package umem owns every buffer that a device (camera DMA, GPU kernel,
// inference engine) reads or writes: CUDA managed, pinned and device memory
// bound at run time through the CUDA driver API, and page-aligned host memory
// for machines without CUDA.
//
// # Ownership
//
// A [Buffer] has exactly one owner at a time: the host (CPU code, V4L2
// capture) or one CUDA stream. Host bytes are only handed out while the host
// owns the buffer; asking for them while a stream owns it returns
// [ErrOwnedByStream] instead of letting the CPU fault on memory the GPU is
// using. Buffers are released exactly once by their allocator's caller;
// Release is idempotent and there are no finalizers.
//
// # Frame pool
//
// A [Pool] holds a fixed number of equally sized slots allocated at start-up.
// A slot is leased with [Pool.Get], shared with [Slot.Retain] and returned
// with [Slot.Release] when its last reference goes; nothing on that path
// allocates on the Go heap.
//
// # Jetson notes
//
// On Xavier and Orin the integrated GPU reports concurrentManagedAccess = 0:
// the CPU must not touch any managed allocation while any kernel runs, and
// prefetching to the GPU is not supported. The CUDA strategies in this
// package therefore attach managed buffers to a single stream for GPU work and
// back to the host after the stream has completed, and never prefetch there.
package umem
