package jpeg

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"sync"
)

// ErrEncode means the encoder failed on an image (libjpeg-turbo's error,
// or image/jpeg's).
var ErrEncode = errors.New("jpeg: encoding failed")

// DefaultQuality is the JPEG quality an Encoder uses unless told.
const DefaultQuality = 80

// EncoderOptions configures NewEncoder.
type EncoderOptions struct {
	// Backend is Auto (libjpeg-turbo, else image/jpeg), TurboJPEG (fail
	// without the library) or Std. EDGED_JPEG=go (or image/jpeg) and
	// turbojpeg override Auto; nvjpeg, a decoder, leaves it Auto.
	Backend string
	// Library is the file dlopen'ed; default libturbojpeg.so.0.
	Library string
	// Quality is 1..100; 0 means DefaultQuality.
	Quality int
}

// encBackend is one encoder implementation: it appends the JPEG of img to
// dst.
type encBackend interface {
	encode(dst []byte, img *image.RGBA, quality int) ([]byte, error)
	close()
}

// Encoder compresses RGBA images as baseline 4:2:0 JPEG. It is safe for
// concurrent use (calls are serialised).
type Encoder struct {
	mu      sync.Mutex
	b       encBackend
	info    Backend
	quality int
}

// NewEncoder returns an encoder on the backend opts and the environment
// select: libjpeg-turbo's tjCompress2 where the library loads (the
// library the decoders load, once per process), image/jpeg otherwise,
// with a warning naming the package to install.
func NewEncoder(opts EncoderOptions) (*Encoder, error) {
	q := opts.Quality
	if q == 0 {
		q = DefaultQuality
	}
	if q < 1 || q > 100 {
		return nil, fmt.Errorf("jpeg: quality %d: want 1..100", q)
	}
	want, forced := opts.Backend, ""
	if want == "" {
		want = Auto
	}
	if want == Auto {
		switch e := os.Getenv(EnvBackend); e {
		case "go", Std:
			want, forced = Std, EnvBackend+"="+e
		case "turbojpeg", TurboJPEG:
			want, forced = TurboJPEG, EnvBackend+"="+e
		}
	}
	lib := opts.Library
	if lib == "" {
		lib = "libturbojpeg.so.0"
	}
	why := func(s string) string {
		if forced != "" {
			return forced + ", " + s
		}
		return s
	}
	switch want {
	case Std:
		return &Encoder{b: stdEncoder{}, quality: q, info: Backend{Name: Std, Why: why("backend = image/jpeg")}}, nil
	case TurboJPEG, Auto:
		t, err := loadTurboEncoder(lib)
		if err == nil {
			return &Encoder{b: t, quality: q, info: Backend{Name: TurboJPEG, Why: why("loaded " + t.path)}}, nil
		}
		if want == TurboJPEG {
			return nil, fmt.Errorf("%w; %s", err, Install)
		}
		fix := Install
		if errors.Is(err, errNoCgo) {
			fix = "build edged with cgo (CGO_ENABLED=1) to load libjpeg-turbo"
		}
		return &Encoder{b: stdEncoder{}, quality: q, info: Backend{Name: Std, Why: err.Error(),
			Warning: "JPEG is encoded with image/jpeg, several times slower than libjpeg-turbo: " + fix}}, nil
	}
	return nil, fmt.Errorf("jpeg: encoder backend %q: want %s, %s or %s", want, Auto, TurboJPEG, Std)
}

// Backend says which encoder serves and why.
func (e *Encoder) Backend() Backend { return e.info }

// Encode appends the JPEG of img to dst and returns the extended slice;
// libjpeg-turbo allocates nothing in Go once dst has room for the largest
// image (tjBufSize), image/jpeg allocates per image.
func (e *Encoder) Encode(dst []byte, img *image.RGBA) ([]byte, error) {
	if img.Rect.Empty() {
		return dst, fmt.Errorf("%w: empty image", ErrEncode)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.b == nil {
		return dst, ErrClosed
	}
	return e.b.encode(dst, img, e.quality)
}

// Close releases the backend; it is idempotent.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.b != nil {
		e.b.close()
		e.b = nil
	}
	return nil
}

// stdEncoder is image/jpeg's encoder: the fallback.
type stdEncoder struct{}

func (stdEncoder) encode(dst []byte, img *image.RGBA, quality int) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	if err := jpeg.Encode(b, img, &jpeg.Options{Quality: quality}); err != nil {
		return dst, fmt.Errorf("%w: image/jpeg: %w", ErrEncode, err)
	}
	return b.Bytes(), nil
}

func (stdEncoder) close() {}
