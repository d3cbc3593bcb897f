//go:build cgo && linux

package v4l2dec

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

// Our own declarations (no NVIDIA header): libv4l2's calls, the few
// NvBufSurface and NvBufSurfTransform calls, and the CUDA driver's EGL
// interop calls, whose entry points come from internal/cuda (Driver.Proc).
// Structure layouts are JetPack 5/6's nvbufsurface.h and
// nvbufsurftransform.h on arm64, by offset.
static struct {
	int (*open)(const char*, int, ...);
	int (*close)(int);
	int (*ioctl)(int, unsigned long, ...);
	void* (*mmap)(void*, size_t, int, int, int, int64_t);
	int (*munmap)(void*, size_t);
} v4;

static struct {
	int (*fromFd)(int, void**);
	int (*create)(void**, uint32_t, void*);
	int (*destroy)(void*);
	int (*mapEgl)(void*, int);
	int (*unmapEgl)(void*, int);
	int (*transform)(void*, void*, void*);
} nb;

static struct {
	int (*registerImage)(void**, void*, unsigned);
	int (*mappedFrame)(void*, void*, unsigned, unsigned);
	int (*unregister)(void*);
} egl;

static const char* edged_j_bind(void* v, void* s, void* t) {
	struct { void* h; const char* name; void** slot; } tab[] = {
		{v, "v4l2_open", (void**)&v4.open}, {v, "v4l2_close", (void**)&v4.close}, {v, "v4l2_ioctl", (void**)&v4.ioctl},
		{v, "v4l2_mmap", (void**)&v4.mmap}, {v, "v4l2_munmap", (void**)&v4.munmap},
		{s, "NvBufSurfaceFromFd", (void**)&nb.fromFd}, {s, "NvBufSurfaceCreate", (void**)&nb.create},
		{s, "NvBufSurfaceDestroy", (void**)&nb.destroy}, {s, "NvBufSurfaceMapEglImage", (void**)&nb.mapEgl},
		{s, "NvBufSurfaceUnMapEglImage", (void**)&nb.unmapEgl},
		{t, "NvBufSurfTransform", (void**)&nb.transform},
	};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
		*tab[i].slot = dlsym(tab[i].h, tab[i].name);
		if (*tab[i].slot == NULL) return tab[i].name;
	}
	return NULL;
}

static void edged_j_set_egl(void* reg, void* frame, void* unreg) {
	egl.registerImage = reg; egl.mappedFrame = frame; egl.unregister = unreg;
}

static void* edged_j_dlopen(const char* name, const char** err) {
	void* h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
	*err = h ? NULL : dlerror();
	return h;
}

// Every wrapper answers ENOSYS before the libraries are bound.
static int edged_j_open(const char* node) {
	if (!v4.open) return -ENOSYS;
	int fd = v4.open(node, O_RDWR | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}
static int edged_j_close(int fd) { return !v4.close ? ENOSYS : v4.close(fd) < 0 ? errno : 0; }
static int edged_j_ioctl(int fd, unsigned long req, void* arg) { return !v4.ioctl ? ENOSYS : v4.ioctl(fd, req, arg) < 0 ? errno : 0; }
static void* edged_j_mmap(int fd, int64_t off, size_t n, int* err) {
	if (!v4.mmap) { *err = ENOSYS; return NULL; }
	void* p = v4.mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	if (p == MAP_FAILED) { *err = errno; return NULL; }
	return p;
}
static int edged_j_munmap(void* p, size_t n) { return !v4.munmap ? ENOSYS : v4.munmap(p, n) < 0 ? errno : 0; }

// NvBufSurface: gpuId 0, batchSize 4, numFilled 8, isContiguous 12,
// memType 16, surfaceList 24; NvBufSurfaceParams: width 0, height 4,
// pitch 8, ..., planeParams 48 (num_planes, width[4], height[4],
// pitch[4] at 48+36, offset[4] at 48+52), mappedAddr 280 (addr[4],
// eglImage at 312).
#define SURF_LIST(s) (*(unsigned char**)((unsigned char*)(s) + 24))
#define EGL_IMAGE(s) (*(void**)(SURF_LIST(s) + 312))

static int edged_j_from_fd(int fd, void** out) { return nb.fromFd ? nb.fromFd(fd, out) : -ENOSYS; }

// NvBufSurfaceCreateParams: gpuId, width, height, size, isContiguous,
// colorFormat 20 (NV12 = 6), layout 24 (pitch = 0), memType 28
// (NVBUF_MEM_SURFACE_ARRAY = 4).
static int edged_j_create_nv12(uint32_t w, uint32_t h, void** out) {
	uint32_t p[8] = {0};
	if (!nb.create) return -ENOSYS;
	p[1] = w; p[2] = h; p[5] = 6; p[6] = 0; p[7] = 4;
	return nb.create(out, 1, p);
}

// NvBufSurfTransformParams: transform_flag (CROP_SRC 1 | FILTER 4),
// flip, filter (nearest 0), src_rect, dst_rect; a rect is top, left,
// width, height.
static int edged_j_convert(void* src, void* dst, uint32_t left, uint32_t top, uint32_t w, uint32_t h) {
	uint32_t srect[4] = { top, left, w, h }, drect[4] = { 0, 0, w, h };
	struct { uint32_t flag, flip, filter, pad; void* src; void* dst; } t = { 1 | 4, 0, 0, 0, srect, drect };
	if (!nb.transform) return -ENOSYS;
	return nb.transform(src, dst, &t);
}

// edged_j_cuda maps a pitch-linear surface's EGL image for CUDA:
// CUeglFrame is frame.pPitch[3] 0, width 24, height 28, depth 32, pitch
// 36, planeCount 40, numChannels 44, frameType 48 (pitch = 1).
static int edged_j_cuda(void* surf, void** res, uint64_t* y, uint64_t* uv, int* pitch, int* where) {
	int r;
	if (!nb.mapEgl || !egl.registerImage) { *where = 1; return -ENOSYS; }
	if ((r = nb.mapEgl(surf, 0)) != 0) { *where = 1; return r; }
	if ((r = egl.registerImage(res, EGL_IMAGE(surf), 0)) != 0) { *where = 2; return r; }
	unsigned char f[64];
	memset(f, 0, sizeof f);
	if ((r = egl.mappedFrame(f, *res, 0, 0)) != 0) { *where = 3; return r; }
	if (*(int*)(f + 48) != 1 || *(unsigned*)(f + 40) < 2) { *where = 4; return -1; }
	*y = (uint64_t)(uintptr_t)((void**)f)[0];
	*uv = (uint64_t)(uintptr_t)((void**)f)[1];
	*pitch = (int)*(unsigned*)(f + 36);
	return 0;
}

static void edged_j_release(void* surf, void* res) {
	if (!nb.destroy) return;
	if (res) egl.unregister(res);
	nb.unmapEgl(surf, 0);
	nb.destroy(surf);
}
*/
import "C"

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors/h26x"
)

// Libraries are the files Load opens: libv4l2 (whose NVIDIA plugin
// reaches the engine), NvBufSurface and NvBufSurfTransform (JetPack's
// nvidia-l4t-multimedia), all in the loader's path on a Jetson.
var Libraries = []string{"libv4l2.so.0", "libnvbufsurface.so.1", "libnvbufsurftransform.so.1"}

var (
	loadOnce sync.Once
	loadErr  error
)

// Load loads the libraries and the CUDA driver's EGL interop calls once
// per process.
func Load() error {
	loadOnce.Do(func() {
		drv, err := cuda.Load()
		if err != nil {
			loadErr = fmt.Errorf("%w: %w", ErrNoDecoder, err)
			return
		}
		var hs [3]unsafe.Pointer
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		for i, name := range Libraries {
			cname := C.CString(name)
			var cerr *C.char
			hs[i] = C.edged_j_dlopen(cname, &cerr)
			C.free(unsafe.Pointer(cname))
			if hs[i] == nil {
				loadErr = fmt.Errorf("%w: %s (JetPack's libv4l2 and nvidia-l4t-multimedia)", ErrNoDecoder, C.GoString(cerr))
				return
			}
		}
		if missing := C.edged_j_bind(hs[0], hs[1], hs[2]); missing != nil {
			loadErr = fmt.Errorf("%w: %s lacks %s", ErrNoDecoder, "JetPack's multimedia libraries", C.GoString(missing))
			return
		}
		reg, frame, unreg := drv.Proc("cuGraphicsEGLRegisterImage"), drv.Proc("cuGraphicsResourceGetMappedEglFrame"), drv.Proc("cuGraphicsUnregisterResource")
		if reg == nil || frame == nil || unreg == nil {
			loadErr = fmt.Errorf("%w: the CUDA driver has no EGL interop (cuGraphicsEGLRegisterImage)", ErrNoDecoder)
			return
		}
		C.edged_j_set_egl(reg, frame, unreg)
	})
	return loadErr
}

// libv4l2 on the node.
type v4l2lib struct{}

func (*v4l2lib) open(node string) (int, error) {
	c := C.CString(node)
	defer C.free(unsafe.Pointer(c))
	fd := int(C.edged_j_open(c))
	if fd < 0 {
		return -1, syscall.Errno(-fd)
	}
	return fd, nil
}

func (*v4l2lib) close(fd int) error {
	if e := C.edged_j_close(C.int(fd)); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

func (*v4l2lib) ioctl(fd int, req uint, arg unsafe.Pointer) error {
	if e := C.edged_j_ioctl(C.int(fd), C.ulong(req), arg); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

func (l *v4l2lib) mmap(fd int, off int64, n int) ([]byte, error) {
	var e C.int
	p := C.edged_j_mmap(C.int(fd), C.int64_t(off), C.size_t(n), &e)
	if p == nil {
		return nil, syscall.Errno(e)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (*v4l2lib) munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if e := C.edged_j_munmap(unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b))); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

// nvbuf is NvBufSurface and its CUDA mapping; a surface is the
// NvBufSurface pointer.
type nvbuf struct {
	res map[uintptr]unsafe.Pointer // CUDA resources of mapped surfaces
}

func (*nvbuf) fromFd(fd int) (uintptr, error) {
	var s unsafe.Pointer
	if r := C.edged_j_from_fd(C.int(fd), &s); r != 0 {
		return 0, fmt.Errorf("NvBufSurfaceFromFd(%d): %d", fd, int(r))
	}
	return uintptr(s), nil
}

func (*nvbuf) allocNV12(w, h int) (uintptr, error) {
	var s unsafe.Pointer
	if r := C.edged_j_create_nv12(C.uint32_t(w), C.uint32_t(h), &s); r != 0 {
		return 0, fmt.Errorf("NvBufSurfaceCreate: %d", int(r))
	}
	return uintptr(s), nil
}

func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func (*nvbuf) convert(src, dst uintptr, left, top, w, h int) error {
	if r := C.edged_j_convert(ptr(src), ptr(dst), C.uint32_t(left), C.uint32_t(top), C.uint32_t(w), C.uint32_t(h)); r != 0 {
		return fmt.Errorf("NvBufSurfTransform: %d", int(r))
	}
	return nil
}

func (n *nvbuf) cuda(surf uintptr) (uintptr, uintptr, int, error) {
	var res unsafe.Pointer
	var y, uv C.uint64_t
	var pitch, where C.int
	if r := C.edged_j_cuda(ptr(surf), &res, &y, &uv, &pitch, &where); r != 0 {
		calls := [...]string{"", "NvBufSurfaceMapEglImage", "cuGraphicsEGLRegisterImage", "cuGraphicsResourceGetMappedEglFrame", "the EGL frame (not pitch-linear with 2 planes)"}
		return 0, 0, 0, fmt.Errorf("%s: %d", calls[where], int(r))
	}
	n.res[surf] = res
	return uintptr(y), uintptr(uv), int(pitch), nil
}

func (n *nvbuf) release(surf uintptr) error {
	C.edged_j_release(ptr(surf), n.res[surf])
	delete(n.res, surf)
	return nil
}

// cudaDevice is the CUDA side: a stream of its own on the primary context
// of device 0 (the Jetson's one GPU; internal/cuda).
type cudaDevice struct{ *cuda.Stream }

func openDevice() (*cudaDevice, error) {
	s, err := cuda.OpenStream(0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDecoder, err)
	}
	return &cudaDevice{s}, nil
}

func (g *cudaDevice) bind() error {
	if err := g.Bind(); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return nil
}

func (g *cudaDevice) attach(p uintptr, host bool) error { return g.AttachMem(p, host) }

func (g *cudaDevice) copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error {
	return g.Copy2D(dst, host, dpitch, src, pitch, width, height)
}

func (g *cudaDevice) sync() error { return g.Sync() }
func (g *cudaDevice) close()      { g.Close() }

// Open makes a decoder for codec c on the Jetson's decoder engine.
func Open(c h26x.Codec, o Options) (*Decoder, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	g, err := openDevice()
	if err != nil {
		return nil, err
	}
	return newDecoder(&v4l2lib{}, &nvbuf{res: map[uintptr]unsafe.Pointer{}}, g, c, o)
}
