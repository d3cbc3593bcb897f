//go:build cgo && linux

package jpeg

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// Our own declarations of the TurboJPEG 2.x entry points (turbojpeg.h of
// libjpeg-turbo 2.0 and later; all exported by Debian bookworm's 2.1.5 and
// by 3.x for compatibility). No link-time dependency: the library is
// dlopen'ed, so the arm64 build keeps its glibc 2.31 floor.
typedef void* tjhandle;
typedef struct { int num, denom; } tjscalingfactor;

enum { EDGED_TJPF_RGB = 0, EDGED_TJPF_RGBX = 2, EDGED_TJERR_WARNING = 0 };
enum { EDGED_TJSAMP_420 = 2 };
enum {
	EDGED_TJFLAG_FASTUPSAMPLE = 256,
	EDGED_TJFLAG_NOREALLOC = 1024,
	EDGED_TJFLAG_STOPONWARNING = 8192,
	EDGED_TJFLAG_LIMITSCANS = 32768,
};

static struct {
	tjhandle (*init)(void);
	int (*header)(tjhandle, const unsigned char*, unsigned long, int*, int*, int*, int*);
	int (*decompress)(tjhandle, const unsigned char*, unsigned long, unsigned char*, int, int, int, int, int);
	tjscalingfactor* (*factors)(int*);
	int (*destroy)(tjhandle);
	char* (*errorStr)(tjhandle);
	int (*errorCode)(tjhandle);
	// The encoder's entry points (tjInitCompress, tjCompress2, tjBufSize:
	// TurboJPEG 1.2 and later), bound beside the decoder's; NULL when the
	// library lacks them, which leaves decoding usable.
	tjhandle (*initEnc)(void);
	int (*compress)(tjhandle, const unsigned char*, int, int, int, int, unsigned char**, unsigned long*, int, int, int);
	unsigned long (*bufSize)(int, int, int);
} tj;

static const char* edged_tj_bind(void* h) {
	struct { const char* name; void** slot; } t[] = {
		{"tjInitDecompress", (void**)&tj.init},
		{"tjDecompressHeader3", (void**)&tj.header},
		{"tjDecompress2", (void**)&tj.decompress},
		{"tjGetScalingFactors", (void**)&tj.factors},
		{"tjDestroy", (void**)&tj.destroy},
		{"tjGetErrorStr2", (void**)&tj.errorStr},
		{"tjGetErrorCode", (void**)&tj.errorCode},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*t[i].slot = dlsym(h, t[i].name);
		if (*t[i].slot == NULL) return t[i].name;
	}
	tj.initEnc = (tjhandle (*)(void))dlsym(h, "tjInitCompress");
	tj.compress = (int (*)(tjhandle, const unsigned char*, int, int, int, int, unsigned char**, unsigned long*, int, int, int))dlsym(h, "tjCompress2");
	tj.bufSize = (unsigned long (*)(int, int, int))dlsym(h, "tjBufSize");
	if (!tj.initEnc || !tj.compress || !tj.bufSize) tj.initEnc = NULL;
	return NULL;
}

static int edged_tj_has_encoder(void) { return tj.initEnc != NULL; }
static tjhandle edged_tj_init_enc(void) { return tj.initEnc(); }
static unsigned long edged_tj_buf_size(int w, int h) { return tj.bufSize(w, h, EDGED_TJSAMP_420); }

// edged_tj_encode compresses the w×h RGBX image src (rows pitch bytes
// apart) as 4:2:0 baseline JPEG of quality q into dst, which holds cap
// bytes (at least tjBufSize), without reallocating it; *n is the size
// written. It returns 0, or -1 for a libjpeg error.
static int edged_tj_encode(tjhandle h, const unsigned char* src, int w, int pitch, int hh, int q,
		unsigned char* dst, unsigned long cap, unsigned long* n) {
	unsigned char* out = dst;
	*n = cap;
	return tj.compress(h, src, w, pitch, hh, EDGED_TJPF_RGBX, &out, n, EDGED_TJSAMP_420, q, EDGED_TJFLAG_NOREALLOC);
}

static void* edged_tj_open(const char* name, const char** err) {
	void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = h ? NULL : dlerror();
	return h;
}

// edged_tj_has_scale says whether the library offers num/denom.
static int edged_tj_has_scale(int num, int denom) {
	int n = 0;
	tjscalingfactor* f = tj.factors(&n);
	for (int i = 0; f && i < n; i++)
		if (f[i].num == num && f[i].denom == denom) return 1;
	return 0;
}

static tjhandle edged_tj_init(void) { return tj.init(); }
static void edged_tj_destroy(tjhandle h) { tj.destroy(h); }
static const char* edged_tj_error(tjhandle h) { return tj.errorStr(h); }
static int edged_tj_error_code(tjhandle h) { return tj.errorCode(h); }

// edged_tj_decode decodes at 1/denom into dst (RGB, rows 3*w apart) after
// checking that the scaled image fits in cap bytes. It returns 0, -1 for a
// libjpeg error or warning, -2 when dst is too small.
static int edged_tj_decode(tjhandle h, const unsigned char* src, unsigned long n, unsigned char* dst,
		unsigned long cap, int denom, int* w, int* hh) {
	int sub = 0, cs = 0, fw = 0, fh = 0;
	if (tj.header(h, src, n, &fw, &fh, &sub, &cs) != 0) return -1;
	*w = (fw + denom - 1) / denom;
	*hh = (fh + denom - 1) / denom;
	if ((unsigned long)(*w) * 3 * (unsigned long)(*hh) > cap) return -2;
	return tj.decompress(h, src, n, dst, *w, 0, *hh, EDGED_TJPF_RGB,
		EDGED_TJFLAG_FASTUPSAMPLE | EDGED_TJFLAG_STOPONWARNING | EDGED_TJFLAG_LIMITSCANS);
}
*/
import "C"

import (
	"fmt"
	"image"
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

var (
	turboMu     sync.Mutex
	turboLoaded string // the library bound into tj, once per process
)

type turbo struct {
	path string
	h    C.tjhandle
	out  *[2]C.int // the decoded size; allocated once so a decode allocates nothing
}

// openTurbo dlopens the library once per process and binds its entry
// points; a second call with another path is refused.
func openTurbo(path string) (string, error) {
	turboMu.Lock()
	defer turboMu.Unlock()
	if turboLoaded != "" {
		if path != turboLoaded {
			return "", fmt.Errorf("%w: %s requested, but %s is already loaded in this process", ErrNoLibrary, path, turboLoaded)
		}
		return turboLoaded, nil
	}
	runtime.LockOSThread() // dlerror is per thread
	cname := C.CString(path)
	var cerr *C.char
	h := C.edged_tj_open(cname, &cerr)
	C.free(unsafe.Pointer(cname))
	var msg string
	if h == nil && cerr != nil {
		msg = C.GoString(cerr)
	}
	runtime.UnlockOSThread()
	if h == nil {
		return "", fmt.Errorf("%w: %s", ErrNoLibrary, msg)
	}
	if missing := C.edged_tj_bind(h); missing != nil {
		return "", fmt.Errorf("%w: %s lacks %s (TurboJPEG 2.0 or later needed)", ErrNoLibrary, path, C.GoString(missing))
	}
	for _, d := range []C.int{2, 4, 8} {
		if C.edged_tj_has_scale(1, d) == 0 {
			return "", fmt.Errorf("%w: %s does not offer scaling factor 1/%d", ErrNoLibrary, path, d)
		}
	}
	turboLoaded = path
	return path, nil
}

// loadTurbo makes a decompressor of the library at path.
func loadTurbo(path string) (*turbo, error) {
	loaded, err := openTurbo(path)
	if err != nil {
		return nil, err
	}
	h := C.edged_tj_init()
	if h == nil {
		return nil, fmt.Errorf("%w: tjInitDecompress failed", ErrNoLibrary)
	}
	return &turbo{path: loaded, h: h, out: new([2]C.int)}, nil
}

// errorf reads the handle's error and replaces the handle: after some
// errors libjpeg-turbo 2.1 leaves it failing every later frame.
func (t *turbo) errorf(what string) error {
	code := "error"
	if C.edged_tj_error_code(t.h) == C.EDGED_TJERR_WARNING {
		code = "warning"
	}
	err := fmt.Errorf("%w: %s: libjpeg-turbo %s: %s", ErrCorrupt, what, code, C.GoString(C.edged_tj_error(t.h)))
	if h := C.edged_tj_init(); h != nil {
		C.edged_tj_destroy(t.h)
		t.h = h
	}
	return err
}

func (t *turbo) decode(dst, src []byte, denom int) (int, int, error) {
	var d *C.uchar
	if len(dst) > 0 {
		d = (*C.uchar)(unsafe.Pointer(&dst[0]))
	}
	r := C.edged_tj_decode(t.h, (*C.uchar)(unsafe.Pointer(&src[0])), C.ulong(len(src)), d, C.ulong(len(dst)), C.int(denom), &t.out[0], &t.out[1])
	w, h := int(t.out[0]), int(t.out[1])
	switch r {
	case 0:
		return w, h, nil
	case -2:
		return 0, 0, fmt.Errorf("%w: %d bytes for a %dx%d RGB24 image", ErrShort, len(dst), w, h)
	}
	return 0, 0, t.errorf("tjDecompress2")
}

func (t *turbo) close() {
	if t.h != nil {
		C.edged_tj_destroy(t.h)
		t.h = nil
	}
}

// turboEnc is a libjpeg-turbo compressor; one goroutine uses it at a time
// (the Encoder's lock).
type turboEnc struct {
	path string
	h    C.tjhandle
	n    *C.ulong // the compressed size; allocated once
}

// loadTurboEncoder makes a compressor of the library at path.
func loadTurboEncoder(path string) (*turboEnc, error) {
	loaded, err := openTurbo(path)
	if err != nil {
		return nil, err
	}
	if C.edged_tj_has_encoder() == 0 {
		return nil, fmt.Errorf("%w: %s lacks tjInitCompress, tjCompress2 or tjBufSize", ErrNoLibrary, loaded)
	}
	h := C.edged_tj_init_enc()
	if h == nil {
		return nil, fmt.Errorf("%w: tjInitCompress failed", ErrNoLibrary)
	}
	return &turboEnc{path: loaded, h: h, n: new(C.ulong)}, nil
}

func (t *turboEnc) encode(dst []byte, img *image.RGBA, quality int) ([]byte, error) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	need := int(C.edged_tj_buf_size(C.int(w), C.int(h)))
	dst = slices.Grow(dst, need)
	out := dst[len(dst) : len(dst)+need]
	src := img.Pix[img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y):]
	r := C.edged_tj_encode(t.h, (*C.uchar)(unsafe.Pointer(&src[0])), C.int(w), C.int(img.Stride), C.int(h), C.int(quality),
		(*C.uchar)(unsafe.Pointer(&out[0])), C.ulong(need), t.n)
	if r != 0 {
		err := fmt.Errorf("%w: tjCompress2: %s", ErrEncode, C.GoString(C.edged_tj_error(t.h)))
		if nh := C.edged_tj_init_enc(); nh != nil {
			C.edged_tj_destroy(t.h)
			t.h = nh
		}
		return dst, err
	}
	return dst[:len(dst)+int(*t.n)], nil
}

func (t *turboEnc) close() {
	if t.h != nil {
		C.edged_tj_destroy(t.h)
		t.h = nil
	}
}
