package umem

import "unsafe"

// driver is the CUDA driver API surface umem uses. The cgo build binds it
// to internal/cuda, the one binding of the driver (driver_cgo.go); the
// pure-Go build has none (driver_nocgo.go); unit tests use a fake that
// models the driver in Go (fake_test.go): the fake stands at this
// interface, which umem declares.
//
// Every call that works in a context takes the context handle and makes it
// current on the calling OS thread first, so callers need not care which
// thread a goroutine runs on.
type driver interface {
	version() (int, error)
	deviceCount() (int, error)
	deviceGet(ordinal int) (int, error)
	deviceName(dev int) (string, error)
	deviceAttr(dev, attr int) (int, error)
	deviceTotalMem(dev int) (uint64, error)
	primaryCtxRetain(dev int) (uintptr, error)
	primaryCtxRelease(dev int) error
	primaryCtxSetFlags(dev int, flags uint32) error
	ctxSetCurrent(ctx uintptr) error
	ctxGetCurrent() (uintptr, error)

	memGetInfo(ctx uintptr) (free, total uint64, err error)
	memAlloc(ctx uintptr, n int) (uintptr, error)
	memAllocManaged(ctx uintptr, n int, flags uint32) (uintptr, unsafe.Pointer, error)
	memFree(ctx uintptr, dptr uintptr) error
	memHostAlloc(ctx uintptr, n int, flags uint32) (unsafe.Pointer, uintptr, error)
	memFreeHost(ctx uintptr, p unsafe.Pointer) error

	streamCreate(ctx uintptr, flags uint32) (uintptr, error)
	streamDestroy(ctx, s uintptr) error
	streamSynchronize(ctx, s uintptr) error
	// streamQuery returns nil when all work is done and resultNotReady
	// while some is pending.
	streamQuery(ctx, s uintptr) error
	streamAttachMem(ctx, s, dptr uintptr, flags uint32) error
	// canPrefetch reports whether the driver exports a prefetch entry point.
	canPrefetch() bool
	// prefetch moves [dptr, dptr+n) to device dst, or to the CPU when dst < 0.
	prefetch(ctx, dptr uintptr, n int, dst int, s uintptr) error
	memcpyHtoD(ctx, dst uintptr, src unsafe.Pointer, n int, s uintptr) error
	memcpyDtoH(ctx uintptr, dst unsafe.Pointer, src uintptr, n int, s uintptr) error
	memcpyDtoD(ctx, dst, src uintptr, n int, s uintptr) error

	eventCreate(ctx uintptr, flags uint32) (uintptr, error)
	eventDestroy(ctx, e uintptr) error
	eventRecord(ctx, e, s uintptr) error
	eventSynchronize(ctx, e uintptr) error
	eventQuery(ctx, e uintptr) error
	eventElapsed(ctx, start, end uintptr) (float32, error)

	// moduleLoad loads a NUL-terminated PTX text or a cubin; log is the JIT
	// error log when loading fails.
	moduleLoad(ctx uintptr, image []byte) (mod uintptr, log string, err error)
	moduleUnload(ctx, mod uintptr) error
	moduleFunction(ctx, mod uintptr, name string) (uintptr, error)
	launch(ctx, fn uintptr, grid, block Dim3, sharedMem uint32, s uintptr, a *Args) error

	// errorText is cuGetErrorString.
	errorText(r Result) (string, bool)
}

// CUDA constants used by umem (values from cuda.h, stable since CUDA 8).
const (
	attrIntegrated              = 18
	attrCanMapHostMemory        = 19
	attrUnifiedAddressing       = 41
	attrCCMajor                 = 75
	attrCCMinor                 = 76
	attrManagedMemory           = 83
	attrPageableMemoryAccess    = 88
	attrConcurrentManagedAccess = 89
	attrMultiprocessorCount     = 16

	memAttachGlobal = 1
	memAttachHost   = 2
	memAttachSingle = 4

	hostAllocPortable  = 1
	hostAllocDeviceMap = 2

	streamNonBlocking = 1

	eventDisableTiming = 2

	ctxSchedBlockingSync = 4
)
