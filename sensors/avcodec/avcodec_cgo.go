//go:build cgo && linux

package avcodec

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

// Our own declarations: no FFmpeg header. Values and offsets that are the
// same in libavcodec 58 (FFmpeg 4.x), 59 (5.x), 60 (6.x) and 61 (7.x),
// measured by compiling each release's headers on x86-64 and aarch64.
enum {
	EDGED_CODEC_H264 = 27, EDGED_CODEC_HEVC = 173,
	EDGED_PIX_YUV420P = 0, EDGED_PIX_YUVJ420P = 12, EDGED_PIX_NV12 = 23,
	EDGED_EAGAIN = -11, EDGED_EOF = -541478725,
	EDGED_PADDING = 64, EDGED_LOG_QUIET = -8, EDGED_LOG_ERROR = 16,
	EDGED_FRAME_FLAG_CORRUPT = 1,
};
// AVPacket
#define PKT_PTS 8
#define PKT_DATA 24
#define PKT_SIZE 32
// AVFrame
#define FR_DATA 0
#define FR_LINESIZE 64
#define FR_WIDTH 104
#define FR_HEIGHT 108
#define FR_FORMAT 116
#define FR_PTS 136
// AVCodecParameters
#define PAR_TYPE 0
#define PAR_ID 4
#define PAR_EXTRADATA 16
#define PAR_EXTRADATA_SIZE 24
#define FIELD(p, off, T) (*(T *)((uint8_t *)(p) + (off)))

static struct {
	unsigned (*avcodec_version)(void);
	const void *(*avcodec_find_decoder)(int);
	void *(*avcodec_alloc_context3)(const void *);
	int (*avcodec_open2)(void *, const void *, void **);
	void (*avcodec_free_context)(void **);
	int (*avcodec_send_packet)(void *, const void *);
	int (*avcodec_receive_frame)(void *, void *);
	void *(*av_packet_alloc)(void);
	void (*av_packet_free)(void **);
	void *(*avcodec_parameters_alloc)(void);
	int (*avcodec_parameters_to_context)(void *, const void *);
	void (*avcodec_parameters_free)(void **);
	void *(*av_frame_alloc)(void);
	void (*av_frame_free)(void **);
	int (*av_opt_set_int)(void *, const char *, int64_t, int);
	int (*av_opt_set)(void *, const char *, const char *, int);
	int (*av_strerror)(int, char *, size_t);
	void *(*av_mallocz)(size_t);
	void (*av_log_set_level)(int);
	void (*av_log_set_callback)(void (*)(void *, int, const char *, va_list));
	const char *(*av_version_info)(void);
} av;

// AVFrame fields that move between majors.
static int fr_flags, fr_decode_error_flags;

// The last error libavcodec logged, and the context it logged it for.
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static void *log_ctx;
static char log_msg[256];

static void edged_av_log(void *avcl, int level, const char *fmt, va_list vl) {
	if (level > EDGED_LOG_ERROR) return;
	pthread_mutex_lock(&log_mu);
	log_ctx = avcl;
	vsnprintf(log_msg, sizeof log_msg, fmt, vl);
	size_t n = strlen(log_msg);
	while (n > 0 && (log_msg[n - 1] == '\n' || log_msg[n - 1] == ' ')) log_msg[--n] = 0;
	pthread_mutex_unlock(&log_mu);
}

// edged_av_last copies the last message logged for ctx into out (cap
// bytes) and forgets it; "" when there is none.
static void edged_av_last(void *ctx, char *out, size_t cap) {
	out[0] = 0;
	pthread_mutex_lock(&log_mu);
	if (log_ctx == ctx && log_msg[0]) {
		snprintf(out, cap, "%s", log_msg);
		log_msg[0] = 0;
	}
	pthread_mutex_unlock(&log_mu);
}

static void *edged_av_open(const char *name, const char **err) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	*err = h ? NULL : dlerror();
	return h;
}

// edged_av_bind binds every function (the av_ ones of libavutil through
// libavcodec's own dependency) and checks that the major version is the
// file's. It returns the name of what is missing, or NULL.
static const char *edged_av_bind(void *h, unsigned want_major) {
	struct { const char *name; void **slot; } t[] = {
		{"avcodec_version", (void **)&av.avcodec_version},
		{"avcodec_find_decoder", (void **)&av.avcodec_find_decoder},
		{"avcodec_alloc_context3", (void **)&av.avcodec_alloc_context3},
		{"avcodec_open2", (void **)&av.avcodec_open2},
		{"avcodec_free_context", (void **)&av.avcodec_free_context},
		{"avcodec_send_packet", (void **)&av.avcodec_send_packet},
		{"avcodec_receive_frame", (void **)&av.avcodec_receive_frame},
		{"av_packet_alloc", (void **)&av.av_packet_alloc},
		{"av_packet_free", (void **)&av.av_packet_free},
		{"avcodec_parameters_alloc", (void **)&av.avcodec_parameters_alloc},
		{"avcodec_parameters_to_context", (void **)&av.avcodec_parameters_to_context},
		{"avcodec_parameters_free", (void **)&av.avcodec_parameters_free},
		{"av_frame_alloc", (void **)&av.av_frame_alloc},
		{"av_frame_free", (void **)&av.av_frame_free},
		{"av_opt_set_int", (void **)&av.av_opt_set_int},
		{"av_opt_set", (void **)&av.av_opt_set},
		{"av_strerror", (void **)&av.av_strerror},
		{"av_mallocz", (void **)&av.av_mallocz},
		{"av_log_set_level", (void **)&av.av_log_set_level},
		{"av_log_set_callback", (void **)&av.av_log_set_callback},
		{"av_version_info", (void **)&av.av_version_info},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		*t[i].slot = dlsym(h, t[i].name);
		if (*t[i].slot == NULL) return t[i].name;
	}
	unsigned major = av.avcodec_version() >> 16;
	if (want_major && major != want_major) return "the major version its file name says";
	switch (major) {
	case 58: fr_flags = 380; fr_decode_error_flags = 440; break;
	case 59: case 60: fr_flags = 316; fr_decode_error_flags = 376; break;
	case 61: fr_flags = 292; fr_decode_error_flags = 344; break;
	default: return "a supported major version (58 to 61)";
	}
	av.av_log_set_level(EDGED_LOG_ERROR);
	av.av_log_set_callback(edged_av_log);
	return NULL;
}

static unsigned edged_av_version(void) { return av.avcodec_version(); }
static const char *edged_av_version_info(void) { return av.av_version_info(); }

static void edged_av_strerror(int r, char *out, size_t cap) {
	if (av.av_strerror(r, out, cap) < 0) snprintf(out, cap, "error %d", r);
}

// One decoder: its context, packet and frame, and what the last
// received frame is.
typedef struct {
	void *ctx, *pkt, *frm;
	int w, h, fmt, corrupt;
	int64_t pts;
} edged_dec;

// edged_av_new makes and opens a decoder. It returns NULL with *r set
// (an AVERROR, or 1 for "no such decoder", 2 for an option refused, 3 for
// out of memory) and where naming the step.
static edged_dec *edged_av_new(int hevc, int threads, const char *thread_type, const uint8_t *extra, int extra_len,
		int *r, const char **where) {
	*r = 0;
	const void *codec = av.avcodec_find_decoder(hevc ? EDGED_CODEC_HEVC : EDGED_CODEC_H264);
	if (!codec) { *r = 1; *where = "avcodec_find_decoder"; return NULL; }
	edged_dec *d = calloc(1, sizeof *d);
	if (!d) { *r = 3; *where = "calloc"; return NULL; }
	d->ctx = av.avcodec_alloc_context3(codec);
	d->pkt = av.av_packet_alloc();
	d->frm = av.av_frame_alloc();
	if (!d->ctx || !d->pkt || !d->frm) { *r = 3; *where = "allocating the decoder"; goto fail; }
	if ((*r = av.av_opt_set_int(d->ctx, "threads", threads, 0)) < 0) { *where = "option threads"; goto fail; }
	if ((*r = av.av_opt_set(d->ctx, "thread_type", thread_type, 0)) < 0) { *where = "option thread_type"; goto fail; }
	if (extra_len > 0) {
		void *par = av.avcodec_parameters_alloc();
		uint8_t *ed = av.av_mallocz(extra_len + EDGED_PADDING);
		if (!par || !ed) { *r = 3; *where = "extradata"; goto fail; }
		memcpy(ed, extra, extra_len);
		FIELD(par, PAR_TYPE, int) = 0; // AVMEDIA_TYPE_VIDEO
		FIELD(par, PAR_ID, int) = hevc ? EDGED_CODEC_HEVC : EDGED_CODEC_H264;
		FIELD(par, PAR_EXTRADATA, uint8_t *) = ed;
		FIELD(par, PAR_EXTRADATA_SIZE, int) = extra_len;
		*r = av.avcodec_parameters_to_context(d->ctx, par);
		av.avcodec_parameters_free(&par); // frees ed too
		if (*r < 0) { *where = "avcodec_parameters_to_context"; goto fail; }
	}
	if ((*r = av.avcodec_open2(d->ctx, codec, NULL)) < 0) { *where = "avcodec_open2"; goto fail; }
	return d;
fail:
	if (d->frm) av.av_frame_free(&d->frm);
	if (d->pkt) av.av_packet_free(&d->pkt);
	if (d->ctx) av.avcodec_free_context(&d->ctx);
	free(d);
	return NULL;
}

static void edged_av_free(edged_dec *d) {
	av.av_frame_free(&d->frm);
	av.av_packet_free(&d->pkt);
	av.avcodec_free_context(&d->ctx);
	free(d);
}

// edged_av_send sends one access unit (n bytes; n == 0 flushes).
static int edged_av_send(edged_dec *d, const uint8_t *data, int n, int64_t pts) {
	if (n == 0) return av.avcodec_send_packet(d->ctx, NULL);
	FIELD(d->pkt, PKT_DATA, const uint8_t *) = data;
	FIELD(d->pkt, PKT_SIZE, int) = n;
	FIELD(d->pkt, PKT_PTS, int64_t) = pts;
	int r = av.avcodec_send_packet(d->ctx, d->pkt);
	FIELD(d->pkt, PKT_DATA, const uint8_t *) = NULL;
	FIELD(d->pkt, PKT_SIZE, int) = 0;
	return r;
}

// edged_av_receive takes the next decoded frame: 0 and d->w... set, or an
// AVERROR (EAGAIN: none ready).
static int edged_av_receive(edged_dec *d) {
	int r = av.avcodec_receive_frame(d->ctx, d->frm);
	if (r < 0) return r;
	d->w = FIELD(d->frm, FR_WIDTH, int);
	d->h = FIELD(d->frm, FR_HEIGHT, int);
	d->fmt = FIELD(d->frm, FR_FORMAT, int);
	d->pts = FIELD(d->frm, FR_PTS, int64_t);
	d->corrupt = (FIELD(d->frm, fr_flags, int) & EDGED_FRAME_FLAG_CORRUPT) || FIELD(d->frm, fr_decode_error_flags, int);
	return 0;
}

// Frame slots are written once and read by another stage (preprocessing,
// or a GPU through mapped memory) after the decoder has moved on: on x86
// the rows are written with non-temporal stores where the destination is
// 16-byte aligned, which saves reading every destination line into the
// cache first (and evicting the decoder's reference pictures).
static int nt_ok(const void *p) { return ((uintptr_t)p & 15) == 0; }

// copy_row copies n bytes.
static void copy_row(uint8_t *dst, const uint8_t *src, int n) {
	int i = 0;
#if defined(__SSE2__)
	if (nt_ok(dst))
		for (; i + 64 <= n; i += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)(src + i)), b = _mm_loadu_si128((const __m128i *)(src + i + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32)), d = _mm_loadu_si128((const __m128i *)(src + i + 48));
			_mm_stream_si128((__m128i *)(dst + i), a);
			_mm_stream_si128((__m128i *)(dst + i + 16), b);
			_mm_stream_si128((__m128i *)(dst + i + 32), c);
			_mm_stream_si128((__m128i *)(dst + i + 48), d);
		}
#endif
	memcpy(dst + i, src + i, n - i);
}

// interleave writes n pairs u[i], v[i] to uv.
static void interleave(uint8_t *uv, const uint8_t *u, const uint8_t *v, int n) {
	int i = 0;
#if defined(__SSE2__)
	if (nt_ok(uv))
		for (; i + 16 <= n; i += 16) {
			__m128i a = _mm_loadu_si128((const __m128i *)(u + i)), b = _mm_loadu_si128((const __m128i *)(v + i));
			_mm_stream_si128((__m128i *)(uv + 2 * i), _mm_unpacklo_epi8(a, b));
			_mm_stream_si128((__m128i *)(uv + 2 * i + 16), _mm_unpackhi_epi8(a, b));
		}
	for (; i + 16 <= n; i += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *)(u + i)), b = _mm_loadu_si128((const __m128i *)(v + i));
		_mm_storeu_si128((__m128i *)(uv + 2 * i), _mm_unpacklo_epi8(a, b));
		_mm_storeu_si128((__m128i *)(uv + 2 * i + 16), _mm_unpackhi_epi8(a, b));
	}
#elif defined(__aarch64__)
	for (; i + 16 <= n; i += 16) {
		uint8x16x2_t p = {{vld1q_u8(u + i), vld1q_u8(v + i)}};
		vst2q_u8(uv + 2 * i, p);
	}
#endif
	for (; i < n; i++) {
		uv[2 * i] = u[i];
		uv[2 * i + 1] = v[i];
	}
}

// edged_av_nv12 writes the received frame into dst as NV12 with lines of
// stride bytes. It returns 0, or -1 for a pixel format it does not read.
static int edged_av_nv12(edged_dec *d, uint8_t *dst, int stride) {
	uint8_t **data = &FIELD(d->frm, FR_DATA, uint8_t *);
	int *ls = &FIELD(d->frm, FR_LINESIZE, int);
	int w = d->w, h = d->h, cw = (w + 1) / 2, ch = (h + 1) / 2;
	if (d->fmt != EDGED_PIX_YUV420P && d->fmt != EDGED_PIX_YUVJ420P && d->fmt != EDGED_PIX_NV12) return -1;
	for (int y = 0; y < h; y++) copy_row(dst + (size_t)y * stride, data[0] + (ptrdiff_t)y * ls[0], w);
	uint8_t *uv = dst + (size_t)stride * h;
	for (int y = 0; y < ch; y++) {
		if (d->fmt == EDGED_PIX_NV12)
			copy_row(uv + (size_t)y * stride, data[1] + (ptrdiff_t)y * ls[1], 2 * cw);
		else
			interleave(uv + (size_t)y * stride, data[1] + (ptrdiff_t)y * ls[1], data[2] + (ptrdiff_t)y * ls[2], cw);
	}
#if defined(__SSE2__)
	_mm_sfence(); // the streamed stores are visible before the frame is handed on
#endif
	return 0;
}

// edged_av_i420 copies the received frame's three planes as they are
// (I420, no interleave): the baseline BenchmarkWriteNV12 compares with.
static void edged_av_i420(edged_dec *d, uint8_t *dst) {
	uint8_t **data = &FIELD(d->frm, FR_DATA, uint8_t *);
	int *ls = &FIELD(d->frm, FR_LINESIZE, int);
	int w = d->w, h = d->h, cw = (w + 1) / 2, ch = (h + 1) / 2;
	for (int y = 0; y < h; y++) memcpy(dst + (size_t)y * w, data[0] + (ptrdiff_t)y * ls[0], w);
	dst += (size_t)w * h;
	for (int p = 1; p <= 2; p++, dst += (size_t)cw * ch)
		for (int y = 0; y < ch; y++) memcpy(dst + (size_t)y * cw, data[p] + (ptrdiff_t)y * ls[p], cw);
}
*/
import "C"

import (
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

var (
	loadMu  sync.Mutex
	loaded  string // the file bound, once per process
	version string // "libavcodec 59.37.100 (FFmpeg 5.1.9-0+deb12u1)"
)

// Load loads libavcodec (lib, or the first of Libraries) once per process
// and returns the file and its version line. A later call for another
// file fails: one process holds one libavcodec.
func Load(lib string) (file, ver string, err error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded != "" {
		if lib != "" && lib != loaded {
			return "", "", fmt.Errorf("%w: %s requested, but %s is loaded in this process already", ErrNoLibrary, lib, loaded)
		}
		return loaded, version, nil
	}
	names := Libraries
	if lib != "" {
		names = []string{lib}
	}
	var tried []string
	for _, name := range names {
		major := uint(0) // what the file name says, checked against the library
		if i := strings.LastIndex(name, ".so."); i >= 0 {
			fmt.Sscanf(name[i+4:], "%d", &major)
		}
		goruntime.LockOSThread() // dlerror is per thread
		cname := C.CString(name)
		var cerr *C.char
		h := C.edged_av_open(cname, &cerr)
		C.free(unsafe.Pointer(cname))
		msg := ""
		if h == nil && cerr != nil {
			msg = C.GoString(cerr)
		}
		goruntime.UnlockOSThread()
		if h == nil {
			tried = append(tried, msg)
			continue
		}
		if missing := C.edged_av_bind(h, C.uint(major)); missing != nil {
			v := uint(C.edged_av_version())
			return "", "", fmt.Errorf("%w: %s (libavcodec %d.%d.%d) lacks %s", ErrNoLibrary, name, v>>16, v>>8&0xff, v&0xff, C.GoString(missing))
		}
		v := uint(C.edged_av_version())
		loaded = name
		version = fmt.Sprintf("libavcodec %d.%d.%d (FFmpeg %s)", v>>16, v>>8&0xff, v&0xff, C.GoString(C.edged_av_version_info()))
		return loaded, version, nil
	}
	return "", "", fmt.Errorf("%w: none of %s loads (%s): install libavcodec (Debian: libavcodec59 or later; JetPack: libavcodec58)",
		ErrNoLibrary, strings.Join(names, ", "), strings.Join(tried, "; "))
}

// Decoder decodes one H.264 or H.265 stream. Its methods must not be
// called concurrently; one goroutine at a time may use it.
type Decoder struct {
	d     *C.edged_dec
	codec h26x.Codec
	desc  string
	errb  *C.char // 256 bytes for messages, C memory so a call allocates nothing
	have  bool    // a received picture waits for Write
}

// Open makes a decoder for codec c.
func Open(c h26x.Codec, o Options) (*Decoder, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if c != h26x.H264 && c != h26x.H265 {
		return nil, fmt.Errorf("avcodec: codec %s", c)
	}
	_, ver, err := Load(o.Library)
	if err != nil {
		return nil, err
	}
	tt := o.ThreadType
	if tt == "" {
		tt = ThreadsFrameSlice
	}
	ctt := C.CString(tt)
	defer C.free(unsafe.Pointer(ctt))
	var extra *C.uint8_t
	if len(o.Params) > 0 {
		extra = (*C.uint8_t)(C.CBytes(o.Params))
		defer C.free(unsafe.Pointer(extra))
	}
	hevc := C.int(0)
	if c == h26x.H265 {
		hevc = 1
	}
	var r C.int
	var where *C.char
	d := C.edged_av_new(hevc, C.int(o.Threads), ctt, extra, C.int(len(o.Params)), &r, &where)
	if d == nil {
		switch r {
		case 1:
			return nil, fmt.Errorf("%w: %s has no %s decoder", ErrNoLibrary, ver, c)
		case 3:
			return nil, fmt.Errorf("avcodec: %s: out of memory", C.GoString(where))
		}
		errb := (*C.char)(C.malloc(256))
		defer C.free(unsafe.Pointer(errb))
		C.edged_av_strerror(r, errb, 256)
		return nil, fmt.Errorf("%w: %s %s: %s: %s", ErrDecode, ver, c, C.GoString(where), C.GoString(errb))
	}
	threads := "threads chosen by libavcodec"
	switch {
	case o.Threads == 1:
		threads = "1 thread"
	case o.Threads > 1:
		threads = fmt.Sprintf("%d threads", o.Threads)
	}
	return &Decoder{d: d, codec: c, errb: (*C.char)(C.malloc(256)),
		desc: fmt.Sprintf("%s, %s, %s (%s)", ver, c, threads, tt)}, nil
}

// Describe names the library, codec and threading.
func (d *Decoder) Describe() string { return d.desc }

// fail is the error of a libavcodec call that returned r.
func (d *Decoder) fail(what string, r C.int) error {
	C.edged_av_strerror(r, d.errb, 256)
	msg := C.GoString(d.errb)
	C.edged_av_last(d.d.ctx, d.errb, 256)
	if last := C.GoString(d.errb); last != "" {
		msg += " (" + last + ")"
	}
	return fmt.Errorf("%w: %s: %s", ErrDecode, what, msg)
}

// Send gives the decoder one access unit; id comes back with its picture
// (Receive). Call Receive until it reports none before the next Send. The
// bytes are copied; au may be reused when Send returns.
func (d *Decoder) Send(au []byte, id uint64) error {
	if d.d == nil {
		return fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	if len(au) == 0 {
		return nil
	}
	d.have = false
	r := C.edged_av_send(d.d, (*C.uint8_t)(unsafe.Pointer(&au[0])), C.int(len(au)), C.int64_t(id))
	if r < 0 && r != C.EDGED_EOF {
		return d.fail("avcodec_send_packet", r)
	}
	return nil
}

// Receive reports the next decoded picture: the id its access unit was
// sent with, and the format Write lays it out in. ok is false when none
// is ready.
func (d *Decoder) Receive() (id uint64, f sensors.Format, ok bool, err error) {
	if d.d == nil {
		return 0, f, false, fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	d.have = false
	r := C.edged_av_receive(d.d)
	if r == C.EDGED_EAGAIN || r == C.EDGED_EOF {
		return 0, f, false, nil
	}
	if r < 0 {
		return 0, f, false, d.fail("avcodec_receive_frame", r)
	}
	w, h := int(d.d.w), int(d.d.h)
	if w <= 0 || h <= 0 || w > h26x.MaxDimension || h > h26x.MaxDimension {
		return 0, f, false, fmt.Errorf("%w: a %dx%d picture", ErrDecode, w, h)
	}
	switch d.d.fmt {
	case C.EDGED_PIX_YUV420P, C.EDGED_PIX_YUVJ420P, C.EDGED_PIX_NV12:
	default:
		return 0, f, false, fmt.Errorf("%w: libavcodec decoded pixel format %d; edged reads 8-bit 4:2:0 only", sensors.ErrFormat, int(d.d.fmt))
	}
	d.have = true
	return uint64(d.d.pts), nv12(w, h), true, nil
}

// Write writes the picture Receive reported into dst as NV12 (its
// Format's layout); corrupt says libavcodec flagged it. dst must hold the
// Format's FrameSize.
func (d *Decoder) Write(dst []byte) (corrupt bool, err error) {
	if !d.have {
		return false, fmt.Errorf("%w: no picture received to write", ErrDecode)
	}
	f := nv12(int(d.d.w), int(d.d.h))
	if n := f.FrameSize(); len(dst) < n {
		return false, fmt.Errorf("%w: %d bytes for a %s picture of %d", sensors.ErrFormat, len(dst), f, n)
	}
	if C.edged_av_nv12(d.d, (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(f.LineBytes())) != 0 {
		return false, fmt.Errorf("%w: pixel format %d", sensors.ErrFormat, int(d.d.fmt))
	}
	d.have = false
	return d.d.corrupt != 0, nil
}

// Drain tells the decoder the stream has ended, so that Receive returns
// the pictures frame threads still hold; after it the decoder takes no
// more access units.
func (d *Decoder) Drain() error {
	if d.d == nil {
		return fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	d.have = false
	if r := C.edged_av_send(d.d, nil, 0, 0); r < 0 && r != C.EDGED_EOF {
		return d.fail("avcodec_send_packet (drain)", r)
	}
	return nil
}

// writeI420 copies the picture Receive reported as I420 (its planes as
// they are), for BenchmarkWriteNV12's baseline; dst must hold it.
func (d *Decoder) writeI420(dst []byte) {
	C.edged_av_i420(d.d, (*C.uint8_t)(unsafe.Pointer(&dst[0])))
}

// Close frees the decoder; it is idempotent.
func (d *Decoder) Close() error {
	if d.d != nil {
		C.edged_av_free(d.d)
		C.free(unsafe.Pointer(d.errb))
		d.d, d.errb = nil, nil
	}
	return nil
}
