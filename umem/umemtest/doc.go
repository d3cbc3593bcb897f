// Package umemtest provides an in-memory umem.Allocator for tests of the
// packages that consume umem buffers (engines, preprocessing, the
// pipeline). Its buffers live on the Go heap, are never handed to a device,
// and can be made to behave as if a CUDA stream owned them, so consumers
// can test how they handle umem.ErrOwnedByStream and umem.ErrReleased. It
// counts live buffers, so a test can check that everything was released
// exactly once.
package umemtest
