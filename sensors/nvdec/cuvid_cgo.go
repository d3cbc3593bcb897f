//go:build cgo && linux

package nvdec

/*
#cgo LDFLAGS: -ldl
#cgo noescape edged_nv_parse
#cgo noescape edged_nv_caps
#cgo noescape edged_nv_create_decoder
#cgo noescape edged_nv_reconfigure
#cgo noescape edged_nv_map
#cgo noescape edged_nv_status
#cgo nocallback edged_nv_caps
#cgo nocallback edged_nv_create_decoder
#cgo nocallback edged_nv_reconfigure
#cgo nocallback edged_nv_map
#cgo nocallback edged_nv_status
#cgo nocallback edged_nv_unmap
#cgo nocallback edged_nv_decode
#cgo nocallback edged_nv_destroy_decoder

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Our own declarations of the libnvcuvid entry points edged calls (the
// structures are byte arrays laid out by nvdec.go's offsets): no NVIDIA
// header, no link-time dependency.
typedef int CUresult;

static struct {
	CUresult (*caps)(void*);
	CUresult (*createDecoder)(void**, void*);
	CUresult (*destroyDecoder)(void*);
	CUresult (*decodePicture)(void*, void*);
	CUresult (*status)(void*, int, void*);
	CUresult (*reconfigure)(void*, void*);
	CUresult (*map)(void*, int, unsigned long long*, unsigned int*, void*);
	CUresult (*unmap)(void*, unsigned long long);
	CUresult (*createParser)(void**, void*);
	CUresult (*parse)(void*, void*);
	CUresult (*destroyParser)(void*);
} nv;

static const char* edged_nv_bind(void* h) {
	struct { const char* name; void** slot; } t[] = {
		{"cuvidGetDecoderCaps", (void**)&nv.caps},
		{"cuvidCreateDecoder", (void**)&nv.createDecoder},
		{"cuvidDestroyDecoder", (void**)&nv.destroyDecoder},
		{"cuvidDecodePicture", (void**)&nv.decodePicture},
		{"cuvidGetDecodeStatus", (void**)&nv.status},
		{"cuvidReconfigureDecoder", (void**)&nv.reconfigure},
		{"cuvidMapVideoFrame64", (void**)&nv.map},
		{"cuvidUnmapVideoFrame64", (void**)&nv.unmap},
		{"cuvidCreateVideoParser", (void**)&nv.createParser},
		{"cuvidParseVideoData", (void**)&nv.parse},
		{"cuvidDestroyVideoParser", (void**)&nv.destroyParser},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*t[i].slot = dlsym(h, t[i].name);
		if (*t[i].slot == NULL) return t[i].name;
	}
	return NULL;
}

static void* edged_nv_dlopen(const char* name, const char** err) {
	void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = h ? NULL : dlerror();
	return h;
}

// The parser's callbacks call the Go ones (callbacks_cgo.go) with the
// parser's user data, a cgo.Handle of the Decoder.
extern int edgedNvdecSequence(uintptr_t, void*);
extern int edgedNvdecDecode(uintptr_t, void*);
extern int edgedNvdecDisplay(uintptr_t, void*);
static int edged_nv_seq_cb(void* u, void* f) { return edgedNvdecSequence((uintptr_t)u, f); }
static int edged_nv_dec_cb(void* u, void* p) { return edgedNvdecDecode((uintptr_t)u, p); }
static int edged_nv_disp_cb(void* u, void* p) { return edgedNvdecDisplay((uintptr_t)u, p); }

// CUVIDPARSERPARAMS (136 bytes): CodecType 0, ulMaxNumDecodeSurfaces 4,
// ulClockRate 8, ulErrorThreshold 12, ulMaxDisplayDelay 16, pUserData 40,
// pfnSequenceCallback 48, pfnDecodePicture 56, pfnDisplayPicture 64.
static CUresult edged_nv_create_parser(unsigned codec, uintptr_t user, uintptr_t* out) {
	unsigned char p[136];
	unsigned v[5] = { codec, 1, 0, 0, 0 }; // 1 surface: the sequence callback says how many; no display delay
	void* f[4] = { (void*)user, (void*)edged_nv_seq_cb, (void*)edged_nv_dec_cb, (void*)edged_nv_disp_cb };
	void* parser = NULL;
	if (!nv.createParser) return 3;
	memset(p, 0, sizeof p);
	memcpy(p, v, sizeof v);
	memcpy(p + 40, f, sizeof f);
	CUresult r = nv.createParser(&parser, p);
	*out = (uintptr_t)parser;
	return r;
}

// CUVIDSOURCEDATAPACKET (32 bytes): flags, payload_size, payload, timestamp.
static CUresult edged_nv_parse(uintptr_t parser, const uint8_t* data, size_t n, unsigned flags, int64_t ts) {
	if (!nv.parse) return 3;
	struct { unsigned long flags; unsigned long size; const uint8_t* payload; long long ts; } pkt = { flags, n, data, ts };
	return nv.parse((void*)parser, &pkt);
}

static CUresult edged_nv_destroy_parser(uintptr_t p) { return nv.destroyParser ? nv.destroyParser((void*)p) : 3; }
static CUresult edged_nv_caps(void* c) { return nv.caps ? nv.caps(c) : 3; }
static CUresult edged_nv_create_decoder(void* info, uintptr_t* out) {
	void* d = NULL;
	if (!nv.createDecoder) return 3;
	CUresult r = nv.createDecoder(&d, info);
	*out = (uintptr_t)d;
	return r;
}
static CUresult edged_nv_reconfigure(uintptr_t d, void* info) { return nv.reconfigure ? nv.reconfigure((void*)d, info) : 3; }
static CUresult edged_nv_destroy_decoder(uintptr_t d) { return nv.destroyDecoder ? nv.destroyDecoder((void*)d) : 3; }
static CUresult edged_nv_decode(uintptr_t d, void* pic) { return nv.decodePicture ? nv.decodePicture((void*)d, pic) : 3; }
static CUresult edged_nv_status(uintptr_t d, int idx, int* st) {
	unsigned char s[192];
	memset(s, 0, sizeof s);
	if (!nv.status) return 3;
	CUresult r = nv.status((void*)d, idx, s);
	memcpy(st, s, sizeof *st);
	return r;
}
static CUresult edged_nv_map(uintptr_t d, int idx, void* proc, uint64_t* dptr, unsigned* pitch) {
	unsigned long long p = 0;
	if (!nv.map) return 3;
	CUresult r = nv.map((void*)d, idx, &p, pitch, proc);
	*dptr = p;
	return r;
}
static CUresult edged_nv_unmap(uintptr_t d, uint64_t p) { return nv.unmap ? nv.unmap((void*)d, p) : 3; }
*/
import "C"

import (
	"fmt"
	goruntime "runtime"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors/h26x"
)

var (
	loadMu sync.Mutex
	loaded string // the file bound, once per process
)

// Load loads libnvcuvid (lib, or the first of Libraries that loads) once
// per process and returns the file. A later call for another file fails.
func Load(lib string) (string, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded != "" {
		if lib != "" && lib != loaded {
			return "", fmt.Errorf("%w: %s requested, but %s is loaded in this process already", ErrNoNVDEC, lib, loaded)
		}
		return loaded, nil
	}
	names := Libraries
	if lib != "" {
		names = []string{lib}
	}
	var tried []string
	for _, name := range names {
		goruntime.LockOSThread() // dlerror is per thread
		cname := C.CString(name)
		var cerr *C.char
		h := C.edged_nv_dlopen(cname, &cerr)
		C.free(unsafe.Pointer(cname))
		msg := name
		if h == nil && cerr != nil {
			msg = C.GoString(cerr)
		}
		goruntime.UnlockOSThread()
		if h == nil {
			tried = append(tried, msg)
			continue
		}
		if missing := C.edged_nv_bind(h); missing != nil {
			return "", fmt.Errorf("%w: %s lacks %s (the driver is too old: NVDEC needs driver 450 or newer)", ErrNoNVDEC, name, C.GoString(missing))
		}
		loaded = name
		return loaded, nil
	}
	// The first name is the loader's; the others are where containers put
	// the driver, so the first failure is the one that says most.
	return "", fmt.Errorf("%w: %s (libnvcuvid is part of the NVIDIA driver: Debian's libnvcuvid1, or the driver's installer)", ErrNoNVDEC, tried[0])
}

// cuvid is the loaded libnvcuvid.
type cuvid struct{}

func (cuvid) createParser(codec uint32, cb callbacks) (uintptr, uintptr, cuda.Result) {
	h := cgo.NewHandle(cb)
	var p C.uintptr_t
	r := cuda.Result(C.edged_nv_create_parser(C.uint(codec), C.uintptr_t(h), &p))
	if r != cuda.Success {
		h.Delete()
		return 0, 0, r
	}
	return uintptr(p), uintptr(h), r
}

func (cuvid) parse(parser uintptr, data []byte, flags uint32, ts int64) cuda.Result {
	return cuda.Result(C.edged_nv_parse(C.uintptr_t(parser), (*C.uint8_t)(unsafe.SliceData(data)), C.size_t(len(data)), C.uint(flags), C.int64_t(ts)))
}

func (cuvid) destroyParser(parser, user uintptr) cuda.Result {
	r := cuda.Result(C.edged_nv_destroy_parser(C.uintptr_t(parser)))
	cgo.Handle(user).Delete()
	return r
}

func (cuvid) caps(c *[capsSize]byte) cuda.Result {
	return cuda.Result(C.edged_nv_caps(unsafe.Pointer(c)))
}

func (cuvid) createDecoder(info *[createSize]byte) (uintptr, cuda.Result) {
	var d C.uintptr_t
	r := cuda.Result(C.edged_nv_create_decoder(unsafe.Pointer(info), &d))
	return uintptr(d), r
}

func (cuvid) reconfigure(dec uintptr, info *[reconfSize]byte) cuda.Result {
	return cuda.Result(C.edged_nv_reconfigure(C.uintptr_t(dec), unsafe.Pointer(info)))
}

func (cuvid) destroyDecoder(dec uintptr) cuda.Result {
	return cuda.Result(C.edged_nv_destroy_decoder(C.uintptr_t(dec)))
}

func (cuvid) decodePicture(dec uintptr, pic unsafe.Pointer) cuda.Result {
	return cuda.Result(C.edged_nv_decode(C.uintptr_t(dec), pic))
}

func (cuvid) decodeStatus(dec uintptr, idx int) (int, cuda.Result) {
	var st C.int
	r := cuda.Result(C.edged_nv_status(C.uintptr_t(dec), C.int(idx), &st))
	return int(st), r
}

func (cuvid) mapFrame(dec uintptr, idx int, proc *[procSize]byte) (uintptr, int, cuda.Result) {
	var p C.uint64_t
	var pitch C.uint
	r := cuda.Result(C.edged_nv_map(C.uintptr_t(dec), C.int(idx), unsafe.Pointer(proc), &p, &pitch))
	return uintptr(p), int(pitch), r
}

func (cuvid) unmapFrame(dec, dptr uintptr) cuda.Result {
	return cuda.Result(C.edged_nv_unmap(C.uintptr_t(dec), C.uint64_t(dptr)))
}

// device is a Decoder's GPU: a CUDA stream of its own on the device's
// primary context (the one umem's frame memory lives in; internal/cuda).
type device struct{ *cuda.Stream }

// openDevice retains the device's primary context and makes a stream.
func openDevice(ordinal int) (*device, error) {
	s, err := cuda.OpenStream(ordinal)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoNVDEC, err)
	}
	return &device{s}, nil
}

func (g *device) bind() error {
	if err := g.Bind(); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return nil
}

func (g *device) stream() uintptr { return g.Handle() }

func (g *device) copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error {
	return g.Copy2D(dst, host, dpitch, src, pitch, width, height)
}

func (g *device) sync() error { return g.Sync() }
func (g *device) close()      { g.Close() }

// Open makes a decoder for codec c on the device o.Device.
func Open(c h26x.Codec, o Options) (*Decoder, error) {
	if _, err := codecOf(c); err != nil {
		return nil, err
	}
	file, err := Load(o.Library)
	if err != nil {
		return nil, err
	}
	g, err := openDevice(o.Device)
	if err != nil {
		return nil, err
	}
	return newDecoder(cuvid{}, g, c, o, fmt.Sprintf("NVDEC (%s) on CUDA device %d, %s, %s", file, o.Device, g.Name, c))
}

// Probe loads libnvcuvid and asks device ordinal's NVDEC what it decodes
// of H.264 and H.265; the error says why NVDEC cannot serve (wrapping
// ErrNoNVDEC). name is the device's.
func Probe(lib string, ordinal int) (name string, h264, h265 Caps, err error) {
	if _, err := Load(lib); err != nil {
		return "", h264, h265, err
	}
	g, err := openDevice(ordinal)
	if err != nil {
		return "", h264, h265, err
	}
	defer g.close()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := g.bind(); err != nil {
		return "", h264, h265, err
	}
	ask := func(codec uint32) (Caps, error) {
		var c [capsSize]byte
		put32(c[:], capCodec, codec)
		put32(c[:], capChroma, chroma420)
		if r := (cuvid{}).caps(&c); r != cuda.Success {
			return Caps{}, fmt.Errorf("%w: cuvidGetDecoderCaps: %w", ErrNoNVDEC, r)
		}
		return Caps{Supported: c[capSupported] != 0, Engines: int(c[capEngines]), MaxWidth: int(le32(c[:], capMaxW)), MaxHeight: int(le32(c[:], capMaxH))}, nil
	}
	if h264, err = ask(codecH264); err != nil {
		return g.Name, h264, h265, err
	}
	if h265, err = ask(codecHEVC); err != nil {
		return g.Name, h264, h265, err
	}
	if !h264.Supported && !h265.Supported {
		return g.Name, h264, h265, fmt.Errorf("%w: %s's NVDEC decodes neither H.264 nor H.265 4:2:0", ErrNoNVDEC, g.Name)
	}
	return g.Name, h264, h265, nil
}
