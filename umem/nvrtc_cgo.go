//go:build cgo && linux

package umem

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// Our own declarations of the NVRTC entry points (stable since CUDA 7).
typedef int nvrtcResult;
typedef void* nvrtcProgram;

static struct {
	nvrtcResult (*version)(int*, int*);
	nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
	nvrtcResult (*compile)(nvrtcProgram, int, const char* const*);
	nvrtcResult (*ptxSize)(nvrtcProgram, size_t*);
	nvrtcResult (*ptx)(nvrtcProgram, char*);
	nvrtcResult (*logSize)(nvrtcProgram, size_t*);
	nvrtcResult (*log)(nvrtcProgram, char*);
	nvrtcResult (*destroy)(nvrtcProgram*);
	const char* (*errorString)(nvrtcResult);
} nv;

static const char* edged_nvrtc_bind(void* h) {
	struct { const char* name; void** slot; } t[] = {
		{"nvrtcVersion", (void**)&nv.version},
		{"nvrtcCreateProgram", (void**)&nv.create},
		{"nvrtcCompileProgram", (void**)&nv.compile},
		{"nvrtcGetPTXSize", (void**)&nv.ptxSize},
		{"nvrtcGetPTX", (void**)&nv.ptx},
		{"nvrtcGetProgramLogSize", (void**)&nv.logSize},
		{"nvrtcGetProgramLog", (void**)&nv.log},
		{"nvrtcDestroyProgram", (void**)&nv.destroy},
		{"nvrtcGetErrorString", (void**)&nv.errorString},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*t[i].slot = dlsym(h, t[i].name);
		if (*t[i].slot == NULL) return t[i].name;
	}
	return NULL;
}

static int edged_nvrtc_version(int* major, int* minor) { return nv.version(major, minor); }

static const char* edged_nvrtc_error(nvrtcResult r) { return nv.errorString(r); }

// edged_nvrtc_compile compiles src; *ptx and *log are malloc'ed (free them).
// *stage names the failing call.
static nvrtcResult edged_nvrtc_compile(const char* src, const char* name, int nopt, const char** opts,
		char** ptx, size_t* ptxSize, char** log, const char** stage) {
	nvrtcProgram p = NULL;
	size_t n = 0;
	*ptx = NULL; *log = NULL; *ptxSize = 0;
	*stage = "nvrtcCreateProgram";
	nvrtcResult r = nv.create(&p, src, name, 0, NULL, NULL);
	if (r) return r;
	*stage = "nvrtcCompileProgram";
	nvrtcResult cr = nv.compile(p, nopt, opts);
	if (nv.logSize(p, &n) == 0 && n > 1) {
		*log = malloc(n);
		if (*log && nv.log(p, *log) != 0) { free(*log); *log = NULL; }
	}
	if (cr) { nv.destroy(&p); return cr; }
	*stage = "nvrtcGetPTX";
	r = nv.ptxSize(p, &n);
	if (r == 0) {
		*ptx = malloc(n);
		if (*ptx == NULL) r = 1; // NVRTC_ERROR_OUT_OF_MEMORY
		else r = nv.ptx(p, *ptx);
		*ptxSize = n;
	}
	nv.destroy(&p);
	return r;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

var (
	nvrtcMu     sync.Mutex
	nvrtcLoaded *cgoNVRTC
)

type cgoNVRTC struct{ path string }

// loadNVRTC loads NVRTC once per process. A second call naming another
// library than the one loaded is an error.
func loadNVRTC(path string) (nvrtcLib, error) {
	nvrtcMu.Lock()
	defer nvrtcMu.Unlock()
	if nvrtcLoaded != nil {
		if path != "" && path != nvrtcLoaded.path {
			return nil, fmt.Errorf("umem: NVRTC %s requested, but %s is already loaded in this process", path, nvrtcLoaded.path)
		}
		return nvrtcLoaded, nil
	}
	names := nvrtcSonames
	if path != "" {
		names = []string{path}
	}
	var firstErr error
	for _, name := range names {
		h, err := dlopen(name)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if missing := C.edged_nvrtc_bind(h); missing != nil {
			return nil, fmt.Errorf("%w: %s lacks %s", ErrNoNVRTC, name, C.GoString(missing))
		}
		nvrtcLoaded = &cgoNVRTC{path: name}
		return nvrtcLoaded, nil
	}
	return nil, fmt.Errorf("%w: tried %v: %w; install the CUDA run-time compiler (cuda-nvrtc package) or set its path", ErrNoNVRTC, names, firstErr)
}

type nvrtcError struct {
	stage string
	code  int
	text  string
}

func (e *nvrtcError) Error() string { return fmt.Sprintf("%s: %s (%d)", e.stage, e.text, e.code) }

func (*cgoNVRTC) version() (int, int, error) {
	var major, minor C.int
	if r := C.edged_nvrtc_version(&major, &minor); r != 0 {
		return 0, 0, &nvrtcError{"nvrtcVersion", int(r), C.GoString(C.edged_nvrtc_error(r))}
	}
	return int(major), int(minor), nil
}

func (*cgoNVRTC) compile(src, name string, opts []string) ([]byte, string, error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	copts := (*[1 << 10]*C.char)(C.malloc(C.size_t(len(opts)+1) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(copts))
	for i, o := range opts {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	var ptx, log *C.char
	var size C.size_t
	var stage *C.char
	r := C.edged_nvrtc_compile(csrc, cname, C.int(len(opts)), &copts[0], &ptx, &size, &log, &stage)
	var logText string
	if log != nil {
		logText = C.GoString(log)
		C.free(unsafe.Pointer(log))
	}
	if r != 0 {
		if ptx != nil {
			C.free(unsafe.Pointer(ptx))
		}
		return nil, logText, &nvrtcError{C.GoString(stage), int(r), C.GoString(C.edged_nvrtc_error(r))}
	}
	code := C.GoBytes(unsafe.Pointer(ptx), C.int(size))
	C.free(unsafe.Pointer(ptx))
	return code, logText, nil
}

// dlopen opens the library name. dlerror is per OS thread, so the
// goroutine stays on one thread from dlopen to dlerror.
func dlopen(name string) (unsafe.Pointer, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cname := C.CString(name)
	h := C.dlopen(cname, C.RTLD_NOW|C.RTLD_LOCAL)
	C.free(unsafe.Pointer(cname))
	if h != nil {
		return h, nil
	}
	if e := C.dlerror(); e != nil {
		return nil, fmt.Errorf("cannot load the NVIDIA driver library: %s", C.GoString(e))
	}
	return nil, fmt.Errorf("cannot load the NVIDIA driver library: dlopen %s failed", name)
}
