//go:build cgo && linux

package cuda

/*
#cgo LDFLAGS: -ldl
#cgo noescape edged_cu_dev_name
#cgo noescape edged_cu_dev_attr
#cgo noescape edged_cu_u64out
#cgo noescape edged_cu_meminfo
#cgo noescape edged_cu_alloc
#cgo noescape edged_cu_alloc_managed
#cgo noescape edged_cu_host_alloc
#cgo noescape edged_cu_stream_create
#cgo noescape edged_cu_event_create
#cgo noescape edged_cu_event_elapsed
#cgo noescape edged_cu_module_load
#cgo noescape edged_cu_module_function
#cgo noescape edged_cu_launch
#cgo noescape edged_cu_memcpy
#cgo nocallback edged_cu_memcpy2d
#cgo noescape edged_cu_error_string
#cgo nocallback edged_cu_call
#cgo nocallback edged_cu_memcpy
#cgo nocallback edged_cu_launch
#cgo nocallback edged_cu_u64out

#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

// A minimal declaration set of our own (never NVIDIA's headers): the
// typedefs and entry points edged calls, with the exact versioned symbol
// names that cuda.h maps the plain names to.
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream, *CUevent, *CUmodule, *CUfunction;
typedef struct { int type; int id; } CUmemLocation;
enum { LOC_DEVICE = 1, LOC_HOST = 2 };
enum { JIT_ERROR_LOG_BUFFER = 5, JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };
enum { EDGED_NO_SYMBOL = -1 };

static struct {
	CUresult (*init)(unsigned);
	CUresult (*driverGetVersion)(int*);
	CUresult (*deviceGetCount)(int*);
	CUresult (*deviceGet)(CUdevice*, int);
	CUresult (*deviceGetName)(char*, int, CUdevice);
	CUresult (*deviceGetAttribute)(int*, int, CUdevice);
	CUresult (*deviceTotalMem)(size_t*, CUdevice);
	CUresult (*primaryCtxRetain)(CUcontext*, CUdevice);
	CUresult (*primaryCtxRelease)(CUdevice);
	CUresult (*primaryCtxSetFlags)(CUdevice, unsigned);
	CUresult (*ctxSetCurrent)(CUcontext);
	CUresult (*ctxGetCurrent)(CUcontext*);
	CUresult (*memGetInfo)(size_t*, size_t*);
	CUresult (*memAlloc)(CUdeviceptr*, size_t);
	CUresult (*memAllocManaged)(CUdeviceptr*, size_t, unsigned);
	CUresult (*memFree)(CUdeviceptr);
	CUresult (*memHostAlloc)(void**, size_t, unsigned);
	CUresult (*memFreeHost)(void*);
	CUresult (*memHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
	CUresult (*streamCreate)(CUstream*, unsigned);
	CUresult (*streamDestroy)(CUstream);
	CUresult (*streamSynchronize)(CUstream);
	CUresult (*streamQuery)(CUstream);
	CUresult (*streamAttachMemAsync)(CUstream, CUdeviceptr, size_t, unsigned);
	CUresult (*memPrefetchAsync)(CUdeviceptr, size_t, CUdevice, CUstream);
	CUresult (*memPrefetchAsync_v2)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);
	CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
	CUresult (*memcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
	CUresult (*memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*memcpy2DAsync)(const void*, CUstream);
	CUresult (*eventCreate)(CUevent*, unsigned);
	CUresult (*eventDestroy)(CUevent);
	CUresult (*eventRecord)(CUevent, CUstream);
	CUresult (*eventSynchronize)(CUevent);
	CUresult (*eventQuery)(CUevent);
	CUresult (*eventElapsedTime)(float*, CUevent, CUevent);
	CUresult (*moduleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
	CUresult (*moduleUnload)(CUmodule);
	CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char*);
	CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		unsigned, CUstream, void**, void**);
	CUresult (*getErrorName)(CUresult, const char**);
	CUresult (*getErrorString)(CUresult, const char**);
	CUresult (*pointerGetAttribute)(void*, int, CUdeviceptr);
} cu;

// edged_cu_bind looks every symbol up; it returns the name of the first
// required one that is missing, or NULL.
static const char* edged_cu_bind(void* h) {
	struct { const char* name; void** slot; int required; } t[] = {
		{"cuInit", (void**)&cu.init, 1},
		{"cuDriverGetVersion", (void**)&cu.driverGetVersion, 1},
		{"cuDeviceGetCount", (void**)&cu.deviceGetCount, 1},
		{"cuDeviceGet", (void**)&cu.deviceGet, 1},
		{"cuDeviceGetName", (void**)&cu.deviceGetName, 1},
		{"cuDeviceGetAttribute", (void**)&cu.deviceGetAttribute, 1},
		{"cuDeviceTotalMem_v2", (void**)&cu.deviceTotalMem, 1},
		{"cuDevicePrimaryCtxRetain", (void**)&cu.primaryCtxRetain, 1},
		{"cuDevicePrimaryCtxRelease_v2", (void**)&cu.primaryCtxRelease, 1},
		{"cuDevicePrimaryCtxSetFlags_v2", (void**)&cu.primaryCtxSetFlags, 1},
		{"cuCtxSetCurrent", (void**)&cu.ctxSetCurrent, 1},
		{"cuCtxGetCurrent", (void**)&cu.ctxGetCurrent, 1},
		{"cuMemGetInfo_v2", (void**)&cu.memGetInfo, 1},
		{"cuMemAlloc_v2", (void**)&cu.memAlloc, 1},
		{"cuMemAllocManaged", (void**)&cu.memAllocManaged, 1},
		{"cuMemFree_v2", (void**)&cu.memFree, 1},
		{"cuMemHostAlloc", (void**)&cu.memHostAlloc, 1},
		{"cuMemFreeHost", (void**)&cu.memFreeHost, 1},
		{"cuMemHostGetDevicePointer_v2", (void**)&cu.memHostGetDevicePointer, 1},
		{"cuStreamCreate", (void**)&cu.streamCreate, 1},
		{"cuStreamDestroy_v2", (void**)&cu.streamDestroy, 1},
		{"cuStreamSynchronize", (void**)&cu.streamSynchronize, 1},
		{"cuStreamQuery", (void**)&cu.streamQuery, 1},
		{"cuStreamAttachMemAsync", (void**)&cu.streamAttachMemAsync, 1},
		{"cuMemPrefetchAsync", (void**)&cu.memPrefetchAsync, 0},
		{"cuMemPrefetchAsync_v2", (void**)&cu.memPrefetchAsync_v2, 0},
		{"cuMemcpyHtoDAsync_v2", (void**)&cu.memcpyHtoDAsync, 1},
		{"cuMemcpyDtoHAsync_v2", (void**)&cu.memcpyDtoHAsync, 1},
		{"cuMemcpyDtoDAsync_v2", (void**)&cu.memcpyDtoDAsync, 1},
		{"cuMemcpy2DAsync_v2", (void**)&cu.memcpy2DAsync, 1},
		{"cuEventCreate", (void**)&cu.eventCreate, 1},
		{"cuEventDestroy_v2", (void**)&cu.eventDestroy, 1},
		{"cuEventRecord", (void**)&cu.eventRecord, 1},
		{"cuEventSynchronize", (void**)&cu.eventSynchronize, 1},
		{"cuEventQuery", (void**)&cu.eventQuery, 1},
		{"cuEventElapsedTime", (void**)&cu.eventElapsedTime, 1},
		{"cuModuleLoadDataEx", (void**)&cu.moduleLoadDataEx, 1},
		{"cuModuleUnload", (void**)&cu.moduleUnload, 1},
		{"cuModuleGetFunction", (void**)&cu.moduleGetFunction, 1},
		{"cuLaunchKernel", (void**)&cu.launchKernel, 1},
		{"cuGetErrorName", (void**)&cu.getErrorName, 1},
		{"cuGetErrorString", (void**)&cu.getErrorString, 1},
		{"cuPointerGetAttribute", (void**)&cu.pointerGetAttribute, 0},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*t[i].slot = dlsym(h, t[i].name);
		if (*t[i].slot == NULL && t[i].required) return t[i].name;
	}
	return NULL;
}

static int edged_cu_has_prefetch(void) { return cu.memPrefetchAsync_v2 != NULL || cu.memPrefetchAsync != NULL; }

#define SETCUR(c) do { CUresult r_ = cu.ctxSetCurrent((CUcontext)(c)); if (r_) return r_; } while (0)

// Operations without out-parameters, selected by op so the Go side needs
// one trampoline. Every operation in a context makes it current first.
enum {
	OP_INIT, OP_CTX_RELEASE, OP_CTX_SETFLAGS, OP_CTX_SET, OP_FREE, OP_FREE_HOST,
	OP_STREAM_DESTROY, OP_STREAM_SYNC, OP_STREAM_QUERY, OP_ATTACH, OP_PREFETCH,
	OP_EVENT_DESTROY, OP_EVENT_RECORD, OP_EVENT_SYNC, OP_EVENT_QUERY, OP_MODULE_UNLOAD,
};

static CUresult edged_cu_call(int op, uintptr_t ctx, uintptr_t a, uintptr_t b, uint64_t c, int64_t d) {
	switch (op) {
	case OP_INIT: return cu.init(0);
	case OP_CTX_RELEASE: return cu.primaryCtxRelease((CUdevice)a);
	case OP_CTX_SETFLAGS: return cu.primaryCtxSetFlags((CUdevice)a, (unsigned)b);
	case OP_CTX_SET: return cu.ctxSetCurrent((CUcontext)ctx);
	}
	SETCUR(ctx);
	switch (op) {
	case OP_FREE: return cu.memFree((CUdeviceptr)a);
	case OP_FREE_HOST: return cu.memFreeHost((void*)a);
	case OP_STREAM_DESTROY: return cu.streamDestroy((CUstream)a);
	case OP_STREAM_SYNC: return cu.streamSynchronize((CUstream)a);
	case OP_STREAM_QUERY: return cu.streamQuery((CUstream)a);
	case OP_ATTACH: return cu.streamAttachMemAsync((CUstream)a, (CUdeviceptr)b, 0, (unsigned)c);
	case OP_PREFETCH: {
		// a: stream, b: pointer, c: bytes, d: device ordinal or -1 for the CPU
		if (cu.memPrefetchAsync_v2) {
			CUmemLocation loc = { d < 0 ? LOC_HOST : LOC_DEVICE, d < 0 ? 0 : (int)d };
			return cu.memPrefetchAsync_v2((CUdeviceptr)b, (size_t)c, loc, 0, (CUstream)a);
		}
		if (cu.memPrefetchAsync) return cu.memPrefetchAsync((CUdeviceptr)b, (size_t)c, (CUdevice)d, (CUstream)a);
		return EDGED_NO_SYMBOL;
	}
	case OP_EVENT_DESTROY: return cu.eventDestroy((CUevent)a);
	case OP_EVENT_RECORD: return cu.eventRecord((CUevent)a, (CUstream)b);
	case OP_EVENT_SYNC: return cu.eventSynchronize((CUevent)a);
	case OP_EVENT_QUERY: return cu.eventQuery((CUevent)a);
	case OP_MODULE_UNLOAD: return cu.moduleUnload((CUmodule)a);
	}
	return 1; // CUDA_ERROR_INVALID_VALUE
}

enum { U64_VERSION, U64_COUNT, U64_DEVICE, U64_TOTALMEM, U64_RETAIN, U64_GETCUR };

static CUresult edged_cu_u64out(int op, int a, uint64_t* out) {
	int i = 0; size_t z = 0; CUcontext c = NULL; CUresult r = 1;
	switch (op) {
	case U64_VERSION: r = cu.driverGetVersion(&i); *out = (uint64_t)i; break;
	case U64_COUNT: r = cu.deviceGetCount(&i); *out = (uint64_t)i; break;
	case U64_DEVICE: { CUdevice dv = 0; r = cu.deviceGet(&dv, a); *out = (uint64_t)dv; break; }
	case U64_TOTALMEM: r = cu.deviceTotalMem(&z, (CUdevice)a); *out = z; break;
	case U64_RETAIN: r = cu.primaryCtxRetain(&c, (CUdevice)a); *out = (uint64_t)(uintptr_t)c; break;
	case U64_GETCUR: r = cu.ctxGetCurrent(&c); *out = (uint64_t)(uintptr_t)c; break;
	}
	return r;
}

static CUresult edged_cu_dev_name(int dev, char* buf, int n) { return cu.deviceGetName(buf, n, (CUdevice)dev); }
static CUresult edged_cu_dev_attr(int dev, int attr, int* v) { return cu.deviceGetAttribute(v, attr, (CUdevice)dev); }

static CUresult edged_cu_meminfo(uintptr_t ctx, uint64_t* free, uint64_t* total) {
	size_t f = 0, t = 0;
	SETCUR(ctx);
	CUresult r = cu.memGetInfo(&f, &t);
	*free = f; *total = t;
	return r;
}

static CUresult edged_cu_alloc(uintptr_t ctx, size_t n, uint64_t* dptr) {
	CUdeviceptr p = 0;
	SETCUR(ctx);
	CUresult r = cu.memAlloc(&p, n);
	*dptr = p;
	return r;
}

static CUresult edged_cu_alloc_managed(uintptr_t ctx, size_t n, unsigned flags, uint64_t* dptr, void** host) {
	CUdeviceptr p = 0;
	SETCUR(ctx);
	CUresult r = cu.memAllocManaged(&p, n, flags);
	*dptr = p;
	*host = (void*)(uintptr_t)p; // unified addressing: one address for both
	return r;
}

static CUresult edged_cu_host_alloc(uintptr_t ctx, size_t n, unsigned flags, void** host, uint64_t* dptr) {
	void* h = NULL; CUdeviceptr d = 0;
	SETCUR(ctx);
	CUresult r = cu.memHostAlloc(&h, n, flags);
	if (r) return r;
	r = cu.memHostGetDevicePointer(&d, h, 0);
	if (r) { cu.memFreeHost(h); return r; }
	*host = h; *dptr = d;
	return 0;
}

enum { CPY_HTOD, CPY_DTOH, CPY_DTOD };

static CUresult edged_cu_memcpy(int op, uintptr_t ctx, uint64_t dst, uint64_t src, void* host, size_t n, uintptr_t s) {
	SETCUR(ctx);
	switch (op) {
	case CPY_HTOD: return cu.memcpyHtoDAsync((CUdeviceptr)dst, host, n, (CUstream)s);
	case CPY_DTOH: return cu.memcpyDtoHAsync(host, (CUdeviceptr)src, n, (CUstream)s);
	case CPY_DTOD: return cu.memcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, (CUstream)s);
	}
	return 1;
}

// CUDA_MEMCPY2D as cuda.h lays it out (LP64): the source's x, y, memory
// type, host pointer, device pointer, array and pitch, the destination's
// alike, then the width in bytes and the rows.
typedef struct {
	size_t srcX, srcY; int srcType; const void* srcHost; CUdeviceptr srcDevice; void* srcArray; size_t srcPitch;
	size_t dstX, dstY; int dstType; void* dstHost; CUdeviceptr dstDevice; void* dstArray; size_t dstPitch;
	size_t width, height;
} edged_memcpy2d;
enum { MEM_HOST = 1, MEM_DEVICE = 2, MEM_UNIFIED = 4 };

// edged_cu_memcpy2d copies rows from device memory (src, spitch) to a
// destination that is either device or unified memory (ddev) or host
// memory (dhost, when ddev is 0).
static CUresult edged_cu_memcpy2d(uintptr_t ctx, uint64_t src, size_t spitch, uint64_t ddev, void* dhost,
		size_t dpitch, size_t width, size_t height, uintptr_t s) {
	edged_memcpy2d p = {0};
	p.srcType = MEM_DEVICE; p.srcDevice = (CUdeviceptr)src; p.srcPitch = spitch;
	if (ddev) { p.dstType = MEM_UNIFIED; p.dstDevice = (CUdeviceptr)ddev; }
	else { p.dstType = MEM_HOST; p.dstHost = dhost; }
	p.dstPitch = dpitch; p.width = width; p.height = height;
	SETCUR(ctx);
	return cu.memcpy2DAsync(&p, (CUstream)s);
}

static CUresult edged_cu_stream_create(uintptr_t ctx, unsigned flags, uintptr_t* out) {
	CUstream s = NULL;
	SETCUR(ctx);
	CUresult r = cu.streamCreate(&s, flags);
	*out = (uintptr_t)s;
	return r;
}

static CUresult edged_cu_event_create(uintptr_t ctx, unsigned flags, uintptr_t* out) {
	CUevent e = NULL;
	SETCUR(ctx);
	CUresult r = cu.eventCreate(&e, flags);
	*out = (uintptr_t)e;
	return r;
}

static CUresult edged_cu_event_elapsed(uintptr_t ctx, uintptr_t start, uintptr_t end, float* ms) {
	SETCUR(ctx);
	return cu.eventElapsedTime(ms, (CUevent)start, (CUevent)end);
}

static CUresult edged_cu_module_load(uintptr_t ctx, const void* image, char* log, size_t logSize, uintptr_t* out) {
	CUmodule m = NULL;
	int opts[2] = { JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void* vals[2] = { log, (void*)(uintptr_t)logSize };
	SETCUR(ctx);
	CUresult r = cu.moduleLoadDataEx(&m, image, 2, opts, vals);
	*out = (uintptr_t)m;
	return r;
}

static CUresult edged_cu_module_function(uintptr_t ctx, uintptr_t mod, const char* name, uintptr_t* out) {
	CUfunction f = NULL;
	SETCUR(ctx);
	CUresult r = cu.moduleGetFunction(&f, (CUmodule)mod, name);
	*out = (uintptr_t)f;
	return r;
}

// edged_cu_launch builds the kernelParams array from a packed argument
// block and offsets; cuLaunchKernel copies the values before returning.
static CUresult edged_cu_launch(uintptr_t ctx, uintptr_t fn, const unsigned* dims, unsigned shmem,
		uintptr_t s, void* blob, const int32_t* off, int n) {
	void* params[32];
	if (n > 32) return 1;
	for (int i = 0; i < n; i++) params[i] = (char*)blob + off[i];
	SETCUR(ctx);
	return cu.launchKernel((CUfunction)fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
		shmem, (CUstream)s, n ? params : NULL, NULL);
}

static const char* edged_cu_error_string(CUresult r, int name) {
	const char* s = NULL;
	if ((name ? cu.getErrorName(r, &s) : cu.getErrorString(r, &s)) != 0) return NULL;
	return s;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// sonames are tried in order; the first is what the NVIDIA driver
// registers in the loader cache, on desktop Linux and on Jetson alike.
var sonames = []string{
	"libcuda.so.1",
	"/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
	"/usr/lib/aarch64-linux-gnu/nvidia/libcuda.so.1",
}

var (
	loadOnce sync.Once
	loadErr  error
	handle   unsafe.Pointer
	theDrv   *Driver
)

// Load dlopens the driver library and binds its entry points, once per
// process; the library stays loaded for the life of the process. It does
// not call cuInit: [Driver.Init] does. The error says which library could
// not be loaded or which entry point it lacks.
func Load() (*Driver, error) {
	loadOnce.Do(func() {
		h, err := dlopenFirst(sonames)
		if err != nil {
			loadErr = err
			return
		}
		if missing := C.edged_cu_bind(h); missing != nil {
			loadErr = fmt.Errorf("the CUDA driver lacks %s (driver too old? edged needs CUDA 11.4 or newer)", C.GoString(missing))
			return
		}
		handle = h
		theDrv = &Driver{}
		f := theDrv.ErrorText
		driverText.Store(&f)
	})
	if loadErr != nil {
		return nil, loadErr
	}
	return theDrv, nil
}

// dlopenFirst opens the first library that loads. dlerror is per OS
// thread, so the goroutine stays on one thread from dlopen to dlerror.
func dlopenFirst(names []string) (unsafe.Pointer, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var first string
	for _, name := range names {
		cname := C.CString(name)
		h := C.dlopen(cname, C.RTLD_NOW|C.RTLD_LOCAL)
		C.free(unsafe.Pointer(cname))
		if h != nil {
			return h, nil
		}
		if first == "" {
			if e := C.dlerror(); e != nil {
				first = C.GoString(e)
			} else {
				first = "dlopen " + name + " failed"
			}
		}
	}
	return nil, fmt.Errorf("cannot load the NVIDIA driver library: %s", first)
}

// Driver is the loaded CUDA driver. Its methods are the driver API calls
// edged makes, each returning the CUresult; every call that works in a
// context takes the context handle and makes it current on the calling OS
// thread first. The zero Driver is not usable: get it from Load.
type Driver struct{}

// Proc returns the driver's entry point of that exact (versioned) name,
// for C code in other packages that calls the driver between its own
// library's calls (nvJPEG's decode loop); nil when the driver lacks it.
func (*Driver) Proc(name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.dlsym(handle, cname)
}

func op(code C.int, ctx, a, b uintptr, c uint64, d int64) Result {
	return Result(C.edged_cu_call(code, C.uintptr_t(ctx), C.uintptr_t(a), C.uintptr_t(b), C.uint64_t(c), C.int64_t(d)))
}

func u64out(code C.int, a int) (uint64, Result) {
	var v C.uint64_t
	r := Result(C.edged_cu_u64out(code, C.int(a), &v))
	return uint64(v), r
}

// Init is cuInit(0).
func (*Driver) Init() Result { return op(C.OP_INIT, 0, 0, 0, 0, 0) }

// Version is cuDriverGetVersion.
func (*Driver) Version() (int, Result) {
	v, r := u64out(C.U64_VERSION, 0)
	return int(v), r
}

// DeviceCount is cuDeviceGetCount.
func (*Driver) DeviceCount() (int, Result) {
	v, r := u64out(C.U64_COUNT, 0)
	return int(v), r
}

// DeviceGet is cuDeviceGet.
func (*Driver) DeviceGet(ordinal int) (int, Result) {
	v, r := u64out(C.U64_DEVICE, ordinal)
	return int(v), r
}

// DeviceName is cuDeviceGetName.
func (*Driver) DeviceName(dev int) (string, Result) {
	var buf [256]C.char
	if r := Result(C.edged_cu_dev_name(C.int(dev), &buf[0], C.int(len(buf)))); r != Success {
		return "", r
	}
	buf[len(buf)-1] = 0
	return C.GoString(&buf[0]), Success
}

// DeviceAttr is cuDeviceGetAttribute.
func (*Driver) DeviceAttr(dev, attr int) (int, Result) {
	var v C.int
	r := Result(C.edged_cu_dev_attr(C.int(dev), C.int(attr), &v))
	return int(v), r
}

// DeviceTotalMem is cuDeviceTotalMem_v2.
func (*Driver) DeviceTotalMem(dev int) (uint64, Result) { return u64out(C.U64_TOTALMEM, dev) }

// PrimaryCtxRetain is cuDevicePrimaryCtxRetain.
func (*Driver) PrimaryCtxRetain(dev int) (uintptr, Result) {
	v, r := u64out(C.U64_RETAIN, dev)
	return uintptr(v), r
}

// PrimaryCtxRelease is cuDevicePrimaryCtxRelease_v2.
func (*Driver) PrimaryCtxRelease(dev int) Result {
	return op(C.OP_CTX_RELEASE, 0, uintptr(dev), 0, 0, 0)
}

// PrimaryCtxSetFlags is cuDevicePrimaryCtxSetFlags_v2.
func (*Driver) PrimaryCtxSetFlags(dev int, flags uint32) Result {
	return op(C.OP_CTX_SETFLAGS, 0, uintptr(dev), uintptr(flags), 0, 0)
}

// CtxSetCurrent is cuCtxSetCurrent.
func (*Driver) CtxSetCurrent(ctx uintptr) Result { return op(C.OP_CTX_SET, ctx, 0, 0, 0, 0) }

// CtxGetCurrent is cuCtxGetCurrent.
func (*Driver) CtxGetCurrent() (uintptr, Result) {
	v, r := u64out(C.U64_GETCUR, 0)
	return uintptr(v), r
}

// MemGetInfo is cuMemGetInfo_v2 in ctx.
func (*Driver) MemGetInfo(ctx uintptr) (free, total uint64, r Result) {
	var f, t C.uint64_t
	r = Result(C.edged_cu_meminfo(C.uintptr_t(ctx), &f, &t))
	return uint64(f), uint64(t), r
}

// MemAlloc is cuMemAlloc_v2 in ctx.
func (*Driver) MemAlloc(ctx uintptr, n int) (uintptr, Result) {
	var p C.uint64_t
	r := Result(C.edged_cu_alloc(C.uintptr_t(ctx), C.size_t(n), &p))
	return uintptr(p), r
}

// MemAllocManaged is cuMemAllocManaged in ctx; the host address is the
// device address (unified addressing).
func (*Driver) MemAllocManaged(ctx uintptr, n int, flags uint32) (uintptr, unsafe.Pointer, Result) {
	var p C.uint64_t
	var h unsafe.Pointer
	r := Result(C.edged_cu_alloc_managed(C.uintptr_t(ctx), C.size_t(n), C.uint(flags), &p, &h))
	return uintptr(p), h, r
}

// MemFree is cuMemFree_v2 in ctx.
func (*Driver) MemFree(ctx uintptr, dptr uintptr) Result { return op(C.OP_FREE, ctx, dptr, 0, 0, 0) }

// MemHostAlloc is cuMemHostAlloc in ctx, with the memory's device address
// (cuMemHostGetDevicePointer_v2).
func (*Driver) MemHostAlloc(ctx uintptr, n int, flags uint32) (unsafe.Pointer, uintptr, Result) {
	var h unsafe.Pointer
	var p C.uint64_t
	r := Result(C.edged_cu_host_alloc(C.uintptr_t(ctx), C.size_t(n), C.uint(flags), &h, &p))
	return h, uintptr(p), r
}

// MemFreeHost is cuMemFreeHost in ctx.
func (*Driver) MemFreeHost(ctx uintptr, p unsafe.Pointer) Result {
	return op(C.OP_FREE_HOST, ctx, uintptr(p), 0, 0, 0)
}

// StreamCreate is cuStreamCreate in ctx.
func (*Driver) StreamCreate(ctx uintptr, flags uint32) (uintptr, Result) {
	var s C.uintptr_t
	r := Result(C.edged_cu_stream_create(C.uintptr_t(ctx), C.uint(flags), &s))
	return uintptr(s), r
}

// StreamDestroy is cuStreamDestroy_v2 in ctx.
func (*Driver) StreamDestroy(ctx, s uintptr) Result { return op(C.OP_STREAM_DESTROY, ctx, s, 0, 0, 0) }

// StreamSynchronize is cuStreamSynchronize in ctx.
func (*Driver) StreamSynchronize(ctx, s uintptr) Result { return op(C.OP_STREAM_SYNC, ctx, s, 0, 0, 0) }

// StreamQuery is cuStreamQuery in ctx: Success when all work is done,
// NotReady while some is pending.
func (*Driver) StreamQuery(ctx, s uintptr) Result { return op(C.OP_STREAM_QUERY, ctx, s, 0, 0, 0) }

// StreamAttachMem is cuStreamAttachMemAsync in ctx.
func (*Driver) StreamAttachMem(ctx, s, dptr uintptr, flags uint32) Result {
	return op(C.OP_ATTACH, ctx, s, dptr, uint64(flags), 0)
}

// CanPrefetch reports whether the driver exports a prefetch entry point.
func (*Driver) CanPrefetch() bool { return C.edged_cu_has_prefetch() != 0 }

// Prefetch is cuMemPrefetchAsync (the _v2 entry point where the driver
// has it) in ctx: [dptr, dptr+n) to device dst, or to the CPU when dst < 0.
func (*Driver) Prefetch(ctx, dptr uintptr, n int, dst int, s uintptr) Result {
	return op(C.OP_PREFETCH, ctx, s, dptr, uint64(n), int64(dst))
}

// MemcpyHtoD is cuMemcpyHtoDAsync_v2 in ctx.
func (*Driver) MemcpyHtoD(ctx, dst uintptr, src unsafe.Pointer, n int, s uintptr) Result {
	copies.htod.Add(1)
	return Result(C.edged_cu_memcpy(C.CPY_HTOD, C.uintptr_t(ctx), C.uint64_t(dst), 0, src, C.size_t(n), C.uintptr_t(s)))
}

// MemcpyDtoH is cuMemcpyDtoHAsync_v2 in ctx.
func (*Driver) MemcpyDtoH(ctx uintptr, dst unsafe.Pointer, src uintptr, n int, s uintptr) Result {
	copies.dtoh.Add(1)
	return Result(C.edged_cu_memcpy(C.CPY_DTOH, C.uintptr_t(ctx), 0, C.uint64_t(src), dst, C.size_t(n), C.uintptr_t(s)))
}

// MemcpyDtoD is cuMemcpyDtoDAsync_v2 in ctx.
func (*Driver) MemcpyDtoD(ctx, dst, src uintptr, n int, s uintptr) Result {
	copies.dtod.Add(1)
	return Result(C.edged_cu_memcpy(C.CPY_DTOD, C.uintptr_t(ctx), C.uint64_t(dst), C.uint64_t(src), nil, C.size_t(n), C.uintptr_t(s)))
}

// Memcpy2D is cuMemcpy2DAsync_v2 in ctx on stream s: height rows of
// width bytes from device memory at src (rows pitch bytes apart) to dst,
// rows dpitch bytes apart. dst is a device address (memory the GPU
// addresses: device, managed or mapped pinned, as unified addressing sees
// it), or, when dst is 0, the host memory at host.
func (*Driver) Memcpy2D(ctx, dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int, s uintptr) Result {
	if dst == 0 {
		copies.dtoh.Add(1)
	} else {
		copies.dtod.Add(1)
	}
	return Result(C.edged_cu_memcpy2d(C.uintptr_t(ctx), C.uint64_t(src), C.size_t(pitch), C.uint64_t(dst), host,
		C.size_t(dpitch), C.size_t(width), C.size_t(height), C.uintptr_t(s)))
}

// EventCreate is cuEventCreate in ctx.
func (*Driver) EventCreate(ctx uintptr, flags uint32) (uintptr, Result) {
	var e C.uintptr_t
	r := Result(C.edged_cu_event_create(C.uintptr_t(ctx), C.uint(flags), &e))
	return uintptr(e), r
}

// EventDestroy is cuEventDestroy_v2 in ctx.
func (*Driver) EventDestroy(ctx, e uintptr) Result { return op(C.OP_EVENT_DESTROY, ctx, e, 0, 0, 0) }

// EventRecord is cuEventRecord in ctx.
func (*Driver) EventRecord(ctx, e, s uintptr) Result { return op(C.OP_EVENT_RECORD, ctx, e, s, 0, 0) }

// EventSynchronize is cuEventSynchronize in ctx.
func (*Driver) EventSynchronize(ctx, e uintptr) Result { return op(C.OP_EVENT_SYNC, ctx, e, 0, 0, 0) }

// EventQuery is cuEventQuery in ctx: Success or NotReady.
func (*Driver) EventQuery(ctx, e uintptr) Result { return op(C.OP_EVENT_QUERY, ctx, e, 0, 0, 0) }

// EventElapsed is cuEventElapsedTime in ctx, in milliseconds.
func (*Driver) EventElapsed(ctx, start, end uintptr) (float32, Result) {
	var ms C.float
	r := Result(C.edged_cu_event_elapsed(C.uintptr_t(ctx), C.uintptr_t(start), C.uintptr_t(end), &ms))
	return float32(ms), r
}

// ModuleLoad is cuModuleLoadDataEx in ctx of a NUL-terminated PTX text or
// a cubin; log is the JIT error log when it fails.
func (*Driver) ModuleLoad(ctx uintptr, image []byte) (mod uintptr, log string, r Result) {
	// The image is copied to C memory: the driver may read it after the
	// call for lazy loading.
	img := C.CBytes(image)
	defer C.free(img)
	var buf [8192]C.char
	var m C.uintptr_t
	r = Result(C.edged_cu_module_load(C.uintptr_t(ctx), img, &buf[0], C.size_t(len(buf)), &m))
	if r != Success {
		buf[len(buf)-1] = 0
		return 0, C.GoString(&buf[0]), r
	}
	return uintptr(m), "", Success
}

// ModuleUnload is cuModuleUnload in ctx.
func (*Driver) ModuleUnload(ctx, mod uintptr) Result {
	return op(C.OP_MODULE_UNLOAD, ctx, mod, 0, 0, 0)
}

// ModuleFunction is cuModuleGetFunction in ctx.
func (*Driver) ModuleFunction(ctx, mod uintptr, name string) (uintptr, Result) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	r := Result(C.edged_cu_module_function(C.uintptr_t(ctx), C.uintptr_t(mod), cname, &f))
	return uintptr(f), r
}

// Launch is cuLaunchKernel in ctx: dims are the grid's and the block's x,
// y and z; the first n kernel parameters lie in blob at the offsets off
// (n at most len(off), at most 32; the driver copies them before
// returning). blob and off are slices, not pointers, so that cgo's pointer
// check looks at their elements alone: the struct that holds them may hold
// Go pointers too (umem.Args has an error field), and a bare
// unsafe.Pointer into it would make the check inspect the whole struct and
// panic ("Go pointer to unpinned Go pointer"), as the GPU tests showed.
func (*Driver) Launch(ctx, fn uintptr, dims *[6]uint32, sharedMem uint32, s uintptr, blob []uint64, off []int32, n int) Result {
	if len(blob) == 0 || len(off) == 0 || n < 0 || n > len(off) {
		return 1 // CUDA_ERROR_INVALID_VALUE
	}
	cd := [6]C.uint{C.uint(dims[0]), C.uint(dims[1]), C.uint(dims[2]), C.uint(dims[3]), C.uint(dims[4]), C.uint(dims[5])}
	return Result(C.edged_cu_launch(C.uintptr_t(ctx), C.uintptr_t(fn), &cd[0], C.uint(sharedMem), C.uintptr_t(s),
		unsafe.Pointer(&blob[0]), (*C.int32_t)(unsafe.Pointer(&off[0])), C.int(n)))
}

// ErrorText is cuGetErrorString.
func (*Driver) ErrorText(r Result) (string, bool) {
	s := C.edged_cu_error_string(C.CUresult(r), 0)
	if s == nil {
		return "", false
	}
	return C.GoString(s), true
}

// ErrorName is cuGetErrorName.
func (*Driver) ErrorName(r Result) (string, bool) {
	s := C.edged_cu_error_string(C.CUresult(r), 1)
	if s == nil {
		return "", false
	}
	return C.GoString(s), true
}
