//go:build cgo && linux

package jpeg

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Our own declarations of the nvJPEG entry points (nvjpeg.h of CUDA 11 and
// later: the toolkit's libnvjpeg.so.11/12/13 and JetPack's), dlopen'ed, and
// of the CUDA driver calls the backend makes from C, whose entry points
// come from internal/cuda (the one package that loads the driver): no
// link-time dependency, no CUDA headers to build.
typedef int nvjpegStatus_t;
typedef void* nvjpegHandle_t;
typedef void* nvjpegJpegState_t;
typedef void* cudaStream_t;
typedef struct { unsigned char* channel[4]; size_t pitch[4]; } nvjpegImage_t;

enum {
	NJ_BACKEND_DEFAULT = 0,
	NJ_BACKEND_HARDWARE = 3,
	NJ_OUTPUT_RGBI = 5,
	NJ_FLAGS_BITSTREAM_STRICT = 1 << 2,
};

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUstream;
typedef unsigned long long CUdeviceptr;
enum { CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3, CU_STREAM_NON_BLOCKING = 1 };

static struct {
	nvjpegStatus_t (*createEx)(int, void*, void*, unsigned int, nvjpegHandle_t*);
	nvjpegStatus_t (*destroy)(nvjpegHandle_t);
	nvjpegStatus_t (*stateCreate)(nvjpegHandle_t, nvjpegJpegState_t*);
	nvjpegStatus_t (*stateDestroy)(nvjpegJpegState_t);
	nvjpegStatus_t (*imageInfo)(nvjpegHandle_t, const unsigned char*, size_t, int*, int*, int*, int*);
	nvjpegStatus_t (*decode)(nvjpegHandle_t, nvjpegJpegState_t, const unsigned char*, size_t, int, nvjpegImage_t*, cudaStream_t);
	nvjpegStatus_t (*batchedInit)(nvjpegHandle_t, nvjpegJpegState_t, int, int, int);
	nvjpegStatus_t (*batched)(nvjpegHandle_t, nvjpegJpegState_t, const unsigned char* const*, const size_t*, nvjpegImage_t*, cudaStream_t);
	nvjpegStatus_t (*hwInfo)(nvjpegHandle_t, unsigned int*, unsigned int*); // optional (CUDA 11.1+)
	nvjpegStatus_t (*getProperty)(int, int*);
} nj;

static struct {
	CUresult (*init)(unsigned int);
	CUresult (*deviceGet)(CUdevice*, int);
	CUresult (*retain)(CUcontext*, CUdevice);
	CUresult (*release)(CUdevice);
	CUresult (*setCurrent)(CUcontext);
	CUresult (*streamCreate)(CUstream*, unsigned int);
	CUresult (*streamDestroy)(CUstream);
	CUresult (*streamSync)(CUstream);
	CUresult (*memAlloc)(CUdeviceptr*, size_t);
	CUresult (*memFree)(CUdeviceptr);
	CUresult (*memAllocManaged)(CUdeviceptr*, size_t, unsigned int);
	CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t, CUstream);
	CUresult (*pointerAttr)(void*, int, CUdeviceptr);
} ncu;

static const char* edged_nj_bind(void* h) {
	struct { const char* name; void** slot; int optional; } t[] = {
		{"nvjpegCreateEx", (void**)&nj.createEx, 0},
		{"nvjpegDestroy", (void**)&nj.destroy, 0},
		{"nvjpegJpegStateCreate", (void**)&nj.stateCreate, 0},
		{"nvjpegJpegStateDestroy", (void**)&nj.stateDestroy, 0},
		{"nvjpegGetImageInfo", (void**)&nj.imageInfo, 0},
		{"nvjpegDecode", (void**)&nj.decode, 0},
		{"nvjpegDecodeBatchedInitialize", (void**)&nj.batchedInit, 0},
		{"nvjpegDecodeBatched", (void**)&nj.batched, 0},
		{"nvjpegGetHardwareDecoderInfo", (void**)&nj.hwInfo, 1},
		{"nvjpegGetProperty", (void**)&nj.getProperty, 0},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*t[i].slot = dlsym(h, t[i].name);
		if (*t[i].slot == NULL && !t[i].optional) return t[i].name;
	}
	return NULL;
}

// edged_nj_set_cu takes the driver's entry points, in the order of
// cuEntryPoints (nvjpeg_cgo.go), which is the order of ncu's fields.
static int edged_nj_set_cu(void** p, int n) {
	void** slots[] = {
		(void**)&ncu.init, (void**)&ncu.deviceGet, (void**)&ncu.retain, (void**)&ncu.release,
		(void**)&ncu.setCurrent, (void**)&ncu.streamCreate, (void**)&ncu.streamDestroy,
		(void**)&ncu.streamSync, (void**)&ncu.memAlloc, (void**)&ncu.memFree,
		(void**)&ncu.memAllocManaged, (void**)&ncu.memcpyDtoH, (void**)&ncu.pointerAttr,
	};
	if (n != (int)(sizeof slots / sizeof slots[0])) return -1;
	for (int i = 0; i < n; i++) *slots[i] = p[i];
	return 0;
}

static void* edged_nj_dlopen(const char* name, const char** err) {
	void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = h ? NULL : dlerror();
	return h;
}

// One decoding engine on one device: a hybrid handle (any JPEG; Huffman
// on the CPU, IDCT and colour on the GPU) and, where the device has JPEG
// engines, a hardware handle for batches.
typedef struct {
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	CUstream copyStream; // copies out to host memory, while the next batch decodes
	nvjpegHandle_t h;
	nvjpegJpegState_t st;
	nvjpegHandle_t hw;
	nvjpegJpegState_t hwst;
	int hwBatch; // batch size hwst is initialised for
	unsigned int engines, cores;
	int major, minor, patch;
} edged_nj;

// edged_nj_job is one frame of a batch: the bitstream (C memory) and
// where its RGB24 image goes on the device (the destination itself when
// the GPU writes it directly, else the decoder's own device buffer).
// status: 0 decoded, 1 not a decodable JPEG (nvJPEG's status in code), 3
// a CUDA or nvJPEG failure that is not the frame's (code, where).
typedef struct {
	const unsigned char* src;
	size_t len;
	CUdeviceptr out;
	int w, h;
	int status, code;
	const char* where;
} edged_nj_job;

static int edged_nj_current(edged_nj* e) { return ncu.setCurrent(e->ctx); }

static edged_nj* edged_nj_open(int ordinal, int wantHW, const char** where, int* code) {
	edged_nj* e = calloc(1, sizeof *e);
	int r;
	*where = NULL;
	if ((r = ncu.init(0)) != 0) { *where = "cuInit"; goto fail; }
	if ((r = ncu.deviceGet(&e->dev, ordinal)) != 0) { *where = "cuDeviceGet"; goto fail; }
	if ((r = ncu.retain(&e->ctx, e->dev)) != 0) { *where = "cuDevicePrimaryCtxRetain"; goto fail; }
	if ((r = ncu.setCurrent(e->ctx)) != 0) { *where = "cuCtxSetCurrent"; goto fail; }
	if ((r = ncu.streamCreate(&e->stream, CU_STREAM_NON_BLOCKING)) != 0) { *where = "cuStreamCreate"; goto fail; }
	if ((r = ncu.streamCreate(&e->copyStream, CU_STREAM_NON_BLOCKING)) != 0) { *where = "cuStreamCreate"; goto fail; }
	// Strict bitstream checking (CUDA 11.6+) makes a damaged frame an
	// error instead of a partly grey image; older libraries refuse the
	// flag, then the default is used.
	if ((r = nj.createEx(NJ_BACKEND_DEFAULT, NULL, NULL, NJ_FLAGS_BITSTREAM_STRICT, &e->h)) != 0 &&
	    (r = nj.createEx(NJ_BACKEND_DEFAULT, NULL, NULL, 0, &e->h)) != 0) { *where = "nvjpegCreateEx"; goto fail; }
	if ((r = nj.stateCreate(e->h, &e->st)) != 0) { *where = "nvjpegJpegStateCreate"; goto fail; }
	nj.getProperty(0, &e->major);
	nj.getProperty(1, &e->minor);
	nj.getProperty(2, &e->patch);
	if (wantHW) {
		if (nj.createEx(NJ_BACKEND_HARDWARE, NULL, NULL, NJ_FLAGS_BITSTREAM_STRICT, &e->hw) == 0 ||
		    nj.createEx(NJ_BACKEND_HARDWARE, NULL, NULL, 0, &e->hw) == 0) {
			if (nj.hwInfo) nj.hwInfo(e->hw, &e->engines, &e->cores);
			if (nj.stateCreate(e->hw, &e->hwst) != 0) {
				nj.destroy(e->hw);
				e->hw = NULL;
			}
		} else {
			e->hw = NULL;
		}
	}
	*code = 0;
	return e;
fail:
	*code = r;
	if (e->st) nj.stateDestroy(e->st);
	if (e->h) nj.destroy(e->h);
	if (e->copyStream) ncu.streamDestroy(e->copyStream);
	if (e->stream) ncu.streamDestroy(e->stream);
	if (e->ctx) ncu.release(e->dev);
	free(e);
	return NULL;
}

static void edged_nj_close(edged_nj* e) {
	ncu.setCurrent(e->ctx);
	ncu.streamSync(e->stream);
	if (e->hwst) nj.stateDestroy(e->hwst);
	if (e->hw) nj.destroy(e->hw);
	nj.stateDestroy(e->st);
	nj.destroy(e->h);
	ncu.streamSync(e->copyStream);
	ncu.streamDestroy(e->copyStream);
	ncu.streamDestroy(e->stream);
	ncu.release(e->dev);
	free(e);
}

static int edged_nj_has_hw(edged_nj* e) { return e->hw != NULL; }

static int edged_nj_header(edged_nj* e, const unsigned char* src, size_t n, int* w, int* h) {
	int nc = 0, sub = 0, ws[4] = {0}, hs[4] = {0};
	int r = nj.imageInfo(e->h, src, n, &nc, &sub, ws, hs);
	*w = ws[0];
	*h = hs[0];
	if (r == 0 && (nc != 1 && nc != 3)) r = 4; // NVJPEG_STATUS_JPEG_NOT_SUPPORTED
	if (r == 0 && (ws[0] <= 0 || hs[0] <= 0)) r = 3; // NVJPEG_STATUS_BAD_JPEG
	return r;
}

// fail marks a job as failed by something other than its data.
static void edged_nj_fail(edged_nj_job* j, const char* where, int code) {
	j->status = 3;
	j->where = where;
	j->code = code;
}

// edged_nj_single decodes one job with the hybrid backend.
static void edged_nj_single(edged_nj* e, edged_nj_job* j) {
	nvjpegImage_t img;
	memset(&img, 0, sizeof img);
	img.channel[0] = (unsigned char*)(uintptr_t)j->out;
	img.pitch[0] = (size_t)j->w * 3;
	int r = nj.decode(e->h, e->st, j->src, j->len, NJ_OUTPUT_RGBI, &img, (cudaStream_t)e->stream);
	int s = ncu.streamSync(e->stream);
	if (s != 0) { edged_nj_fail(j, "cuStreamSynchronize", s); return; }
	if (r != 0) {
		j->status = (r == 2 || r == 5 || r == 6 || r == 8) ? 3 : 1;
		j->code = r;
		j->where = "nvjpegDecode";
		return;
	}
	j->status = 0;
}

// edged_nj_hw decodes n jobs as one batch on the JPEG engines and
// returns 0, or -1 when the hardware refused the batch (a progressive or
// 4:1:1 frame, a damaged one); the images may then be partly written.
static int edged_nj_hw(edged_nj* e, edged_nj_job* jobs, int n) {
	const unsigned char* srcs[64];
	size_t lens[64];
	nvjpegImage_t imgs[64];
	if (n > 64) return -1;
	for (int i = 0; i < n; i++) {
		srcs[i] = jobs[i].src;
		lens[i] = jobs[i].len;
		memset(&imgs[i], 0, sizeof imgs[i]);
		imgs[i].channel[0] = (unsigned char*)(uintptr_t)jobs[i].out;
		imgs[i].pitch[0] = (size_t)jobs[i].w * 3;
	}
	if (e->hwBatch != n) {
		if (nj.batchedInit(e->hw, e->hwst, n, 1, NJ_OUTPUT_RGBI) != 0) { e->hwBatch = 0; return -1; }
		e->hwBatch = n;
	}
	int ok = nj.batched(e->hw, e->hwst, srcs, lens, imgs, (cudaStream_t)e->stream) == 0;
	int r = ncu.streamSync(e->stream);
	if (r != 0) {
		for (int i = 0; i < n; i++) edged_nj_fail(&jobs[i], "cuStreamSynchronize", r);
		return 0;
	}
	if (!ok) return -1;
	for (int i = 0; i < n; i++) jobs[i].status = 0;
	return 0;
}

// edged_nj_decode decodes n jobs whose headers were read: as one batch on
// the JPEG engines where there are some. When the hardware refuses the
// batch, each frame is tried alone on it, so good frames decode as they
// always do, and what the hardware refuses alone goes to the hybrid
// backend, which decides whether the frame is bad. It returns how many
// went through the JPEG engines.
static int edged_nj_decode(edged_nj* e, edged_nj_job* jobs, int n) {
	int r, hw = 0;
	if ((r = ncu.setCurrent(e->ctx)) != 0) {
		for (int i = 0; i < n; i++) edged_nj_fail(&jobs[i], "cuCtxSetCurrent", r);
		return 0;
	}
	if (e->hw) {
		if (edged_nj_hw(e, jobs, n) == 0) return n;
		for (int i = 0; i < n; i++) {
			if (n > 1 && edged_nj_hw(e, &jobs[i], 1) == 0) {
				hw++;
				continue;
			}
			edged_nj_single(e, &jobs[i]);
		}
		return hw;
	}
	for (int i = 0; i < n; i++) edged_nj_single(e, &jobs[i]);
	return 0;
}

// edged_nj_alloc returns n bytes of device memory, or 0.
static CUdeviceptr edged_nj_alloc(edged_nj* e, size_t n) {
	CUdeviceptr d = 0;
	ncu.setCurrent(e->ctx);
	if (ncu.memAlloc(&d, n) != 0) return 0;
	return d;
}

static void edged_nj_free_dev(edged_nj* e, CUdeviceptr d) { ncu.setCurrent(e->ctx); ncu.memFree(d); }

// edged_nj_copy_out copies a decoded image from device memory to dst.
static int edged_nj_copy_out(edged_nj* e, void* dst, CUdeviceptr src, size_t n) {
	int r = ncu.setCurrent(e->ctx);
	if (r == 0) r = ncu.memcpyDtoH(dst, src, n, e->copyStream);
	if (r == 0) r = ncu.streamSync(e->copyStream);
	return r;
}

// edged_nj_device_ptr is the device address of host pointer p when the GPU
// can address it (managed or mapped pinned memory), else 0.
static CUdeviceptr edged_nj_device_ptr(edged_nj* e, void* p) {
	CUdeviceptr d = 0;
	ncu.setCurrent(e->ctx);
	if (ncu.pointerAttr(&d, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)p) != 0) return 0;
	return d;
}

// For tests: managed memory the GPU and CPU both address.
static void* edged_nj_alloc_managed(edged_nj* e, size_t n) {
	CUdeviceptr d = 0;
	ncu.setCurrent(e->ctx);
	if (ncu.memAllocManaged(&d, n, 1) != 0) return NULL; // CU_MEM_ATTACH_GLOBAL
	return (void*)(uintptr_t)d;
}
static void edged_nj_free(edged_nj* e, void* p) { ncu.setCurrent(e->ctx); ncu.memFree((CUdeviceptr)(uintptr_t)p); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
)

var (
	nvMu     sync.Mutex
	nvLoaded string // the nvJPEG library bound into nj, once per process
)

// nvLibraries are tried in order when GPU.Library is empty: the CUDA 13,
// 12 and 11 runtimes (JetPack 6 ships 12, JetPack 5 ships 11), on the
// library path and then in /usr/local/cuda/lib64.
var nvLibraries = []string{"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11"}

func dlopen(name string) (unsafe.Pointer, string) {
	runtime.LockOSThread() // dlerror is per thread
	defer runtime.UnlockOSThread()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cerr *C.char
	h := C.edged_nj_dlopen(cname, &cerr)
	if h == nil && cerr != nil {
		return nil, C.GoString(cerr)
	}
	return h, ""
}

// cuEntryPoints are the CUDA driver calls the C side makes, in the order
// edged_nj_set_cu takes them.
var cuEntryPoints = [...]string{
	"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
	"cuCtxSetCurrent", "cuStreamCreate", "cuStreamDestroy_v2",
	"cuStreamSynchronize", "cuMemAlloc_v2", "cuMemFree_v2",
	"cuMemAllocManaged", "cuMemcpyDtoHAsync_v2", "cuPointerGetAttribute",
}

// loadNVJPEG binds libnvjpeg, and the CUDA driver through internal/cuda,
// once per process.
func loadNVJPEG(path string) (string, error) {
	nvMu.Lock()
	defer nvMu.Unlock()
	if nvLoaded != "" {
		if path != "" && path != nvLoaded {
			return "", fmt.Errorf("%w: %s requested, but %s is already loaded in this process", ErrNoNVJPEG, path, nvLoaded)
		}
		return nvLoaded, nil
	}
	drv, err := cuda.Load()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoNVJPEG, err)
	}
	var cu [len(cuEntryPoints)]unsafe.Pointer
	for i, name := range cuEntryPoints {
		if cu[i] = drv.Proc(name); cu[i] == nil {
			return "", fmt.Errorf("%w: the CUDA driver lacks %s (CUDA 11 or later needed)", ErrNoNVJPEG, name)
		}
	}
	names := nvLibraries
	if path != "" {
		names = []string{path}
	}
	if path == "" {
		for _, n := range nvLibraries {
			names = append(names, "/usr/local/cuda/lib64/"+n)
		}
	}
	var tried []string
	for _, n := range names {
		h, msg := dlopen(n)
		if h == nil {
			tried = append(tried, msg)
			continue
		}
		if missing := C.edged_nj_bind(h); missing != nil {
			return "", fmt.Errorf("%w: %s lacks %s (CUDA 11 or later needed)", ErrNoNVJPEG, n, C.GoString(missing))
		}
		if C.edged_nj_set_cu(&cu[0], C.int(len(cu))) != 0 {
			panic("jpeg: cuEntryPoints and edged_nj_set_cu disagree")
		}
		nvLoaded = n
		return n, nil
	}
	return "", fmt.Errorf("%w: %v", ErrNoNVJPEG, tried)
}

// nvDevice is one nvJPEG engine (handles, stream, scratch) on one device.
type nvDevice struct {
	e       *C.edged_nj
	jobs    *[maxBatch]C.edged_nj_job // C memory: the batch handed to C
	version string
	hw      bool
	engines int
}

func openNVDevice(ordinal int, wantHW bool) (*nvDevice, error) {
	runtime.LockOSThread() // the primary context is made current on this thread
	defer runtime.UnlockOSThread()
	var where *C.char
	var code C.int
	hw := C.int(0)
	if wantHW {
		hw = 1
	}
	e := C.edged_nj_open(C.int(ordinal), hw, &where, &code)
	if e == nil {
		return nil, fmt.Errorf("%w: %s failed on device %d (status %d)", ErrNoNVJPEG, C.GoString(where), ordinal, int(code))
	}
	jobs := (*[maxBatch]C.edged_nj_job)(C.calloc(maxBatch, C.size_t(unsafe.Sizeof(C.edged_nj_job{}))))
	return &nvDevice{e: e, jobs: jobs, hw: C.edged_nj_has_hw(e) != 0, engines: int(e.engines),
		version: fmt.Sprintf("%d.%d.%d", int(e.major), int(e.minor), int(e.patch))}, nil
}

// header reads the frame's size into out (kept by the caller, so the
// call allocates nothing) and returns nvJPEG's status.
func (d *nvDevice) header(src []byte, out *[2]C.int) (int, int, int) {
	r := C.edged_nj_header(d.e, (*C.uchar)(unsafe.Pointer(&src[0])), C.size_t(len(src)), &out[0], &out[1])
	return int(out[0]), int(out[1]), int(r)
}

// devicePtr reports whether the GPU can write p's memory directly.
func (d *nvDevice) devicePtr(p []byte) uint64 {
	return uint64(C.edged_nj_device_ptr(d.e, unsafe.Pointer(&p[0])))
}

// run decodes the batch in reqs (headers read, bitstreams staged) and
// fills in each request's result. It returns how many went through the
// JPEG engines.
func (d *nvDevice) run(reqs []*nvRequest) int {
	for i, r := range reqs {
		j := &d.jobs[i]
		*j = C.edged_nj_job{}
		j.src = (*C.uchar)(r.stage.src)
		j.len = C.size_t(r.n)
		j.out = C.CUdeviceptr(r.out)
		j.w, j.h = C.int(r.w), C.int(r.h)
	}
	n := int(C.edged_nj_decode(d.e, &d.jobs[0], C.int(len(reqs))))
	for i, r := range reqs {
		j := &d.jobs[i]
		r.status, r.code = int(j.status), int(j.code)
		r.where = ""
		if j.where != nil {
			r.where = C.GoString(j.where) // static strings; only on failure
		}
	}
	return n
}

// nvStage is one Decoder's memory: the bitstream in C memory (the batch
// in C holds no Go pointers) and a device buffer for images that are
// copied out to host memory the GPU cannot write.
type nvStage struct {
	d      *nvDevice
	hdr    *[2]C.int // header's output
	src    unsafe.Pointer
	srcCap int
	out    uint64
	outCap int
}

// header reads src's size (see nvDevice.header).
func (s *nvStage) header(src []byte) (int, int, int) {
	if s.hdr == nil {
		s.hdr = new([2]C.int)
	}
	return s.d.header(src, s.hdr)
}

// put copies src into the stage; it allocates only when a frame is larger
// than every one before.
func (s *nvStage) put(src []byte) error {
	if len(src) > s.srcCap {
		p := C.realloc(s.src, C.size_t(len(src)))
		if p == nil {
			return fmt.Errorf("%w: no memory for a %d-byte frame", ErrDevice, len(src))
		}
		s.src, s.srcCap = p, len(src)
	}
	copy(unsafe.Slice((*byte)(s.src), len(src)), src)
	return nil
}

// device returns the stage's device buffer of at least n bytes.
func (s *nvStage) device(n int) (uint64, error) {
	if n > s.outCap {
		if s.out != 0 {
			C.edged_nj_free_dev(s.d.e, C.CUdeviceptr(s.out))
			s.out, s.outCap = 0, 0
		}
		p := uint64(C.edged_nj_alloc(s.d.e, C.size_t(n)))
		if p == 0 {
			return 0, fmt.Errorf("%w: cuMemAlloc of %d bytes failed", ErrDevice, n)
		}
		s.out, s.outCap = p, n
	}
	return s.out, nil
}

// copyOut copies n decoded bytes from the device buffer to dst.
func (s *nvStage) copyOut(dst []byte) error {
	if r := C.edged_nj_copy_out(s.d.e, unsafe.Pointer(&dst[0]), C.CUdeviceptr(s.out), C.size_t(len(dst))); r != 0 {
		return fmt.Errorf("%w: cuMemcpyDtoHAsync failed (status %d)", ErrDevice, int(r))
	}
	return nil
}

func (s *nvStage) free() {
	if s.out != 0 {
		C.edged_nj_free_dev(s.d.e, C.CUdeviceptr(s.out))
	}
	C.free(s.src)
	*s = nvStage{}
}

func (d *nvDevice) close() {
	C.edged_nj_close(d.e)
	C.free(unsafe.Pointer(d.jobs))
}

// allocManaged and freeManaged are for tests: memory the GPU addresses.
func (d *nvDevice) allocManaged(n int) []byte {
	p := C.edged_nj_alloc_managed(d.e, C.size_t(n))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

func (d *nvDevice) freeManaged(b []byte) { C.edged_nj_free(d.e, unsafe.Pointer(&b[0])) }
