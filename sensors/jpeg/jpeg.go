package jpeg

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Errors.
var (
	// ErrCorrupt means the data is not a complete, valid JPEG image:
	// empty, truncated, bad markers or entropy-coded data, or a libjpeg
	// warning. Drop the frame.
	ErrCorrupt = errors.New("jpeg: corrupt frame")
	// ErrUnsupported means a well-formed frame uses a feature edged does
	// not decode on every backend (arithmetic coding, CMYK, 12-bit
	// samples, lossless or hierarchical coding, unusual subsampling; see
	// ParseHeader). It comes wrapped with ErrCorrupt: drop the frame.
	ErrUnsupported = errors.New("jpeg: unsupported JPEG")
	// ErrShort means the destination cannot hold the decoded image.
	ErrShort = errors.New("jpeg: destination too small")
	// ErrNoLibrary means libjpeg-turbo could not be loaded.
	ErrNoLibrary = errors.New("jpeg: libjpeg-turbo not available")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("jpeg: decoder closed")
	// errNoCgo: a binary without cgo cannot dlopen.
	errNoCgo = errors.New("this edged binary was built without cgo")
	// ErrScale means a scale other than 1, 2, 4 or 8 was asked for, or
	// a scale the backend does not decode at (nvJPEG: full scale only).
	ErrScale = errors.New("jpeg: unsupported scale")
	// ErrNoNVJPEG means nvJPEG (or the CUDA driver it needs) could not be
	// loaded or opened on the device.
	ErrNoNVJPEG = errors.New("jpeg: nvJPEG not available")
	// ErrDevice means the GPU failed a decode for a reason that is not
	// the frame's (CUDA or nvJPEG error other than bad data).
	ErrDevice = errors.New("jpeg: GPU decode failed")
)

// Backend names.
const (
	Auto      = "auto"
	NVJPEG    = "nvJPEG"
	TurboJPEG = "libjpeg-turbo"
	Std       = "image/jpeg"
)

// EnvBackend names the environment variable that forces a backend:
// "go" (or "image/jpeg"), "turbojpeg" (or "libjpeg-turbo") or "nvjpeg".
const EnvBackend = "EDGED_JPEG"

// Install is the advice given when libjpeg-turbo is missing.
const Install = "install libturbojpeg0 (Debian) or libturbojpeg (Ubuntu, JetPack)"

// Options configures New.
type Options struct {
	// Backend is Auto (default: nvJPEG when GPU is set, else
	// libjpeg-turbo, else image/jpeg), NVJPEG or TurboJPEG (fail without
	// the library) or Std. EDGED_JPEG overrides Auto.
	Backend string
	// Library is the file dlopen'ed; default libturbojpeg.so.0.
	Library string
	// GPU says frames go to a CUDA device: decode them there with nvJPEG.
	// nil: the CPU decodes (Auto never picks nvJPEG).
	GPU *GPU
}

// GPU is the CUDA device that decodes, and how.
type GPU struct {
	// Device is the CUDA device ordinal (config gpu.device).
	Device int
	// Library is the nvJPEG file dlopen'ed; default the first of
	// libnvjpeg.so.13, .12, .11 that loads.
	Library string
	// NoHardware keeps batches off the JPEG engines (A100/H100-class,
	// Jetson Orin) and on the hybrid backend.
	NoHardware bool
	// Direct lets the GPU write the decoded image into the destination
	// itself when it can address it (mapped pinned or managed memory on a
	// device with concurrent managed access). Otherwise, and always where
	// managed memory is attached to the host between GPU work (Jetson,
	// concurrentManagedAccess = 0), the image is decoded into device
	// memory and copied to the destination by the copy engine.
	Direct bool
}

// Backend says which decoder serves and why.
type Backend struct {
	Name string // NVJPEG, TurboJPEG or Std
	Why  string
	// Warning is set when the slow fallback was chosen because the library
	// is missing; it names the package to install.
	Warning string
	// FullScaleOnly: the backend does not decode at 1/2, 1/4 and 1/8
	// (nvJPEG; the GPU's resize is cheap).
	FullScaleOnly bool
}

// ChooseScale is ChooseScale for frames this backend decodes: 1/1, and
// why, for one that decodes at full scale only.
func (b Backend) ChooseScale(srcW, srcH, dstW, dstH int, resize string) (int, string) {
	if b.FullScaleOnly {
		return 1, "1/1: " + b.Name + " decodes at full scale only; the GPU's resize reads the whole frame"
	}
	return ChooseScale(srcW, srcH, dstW, dstH, resize)
}

func (b Backend) String() string {
	s := b.Name + " (" + b.Why + ")"
	if b.Warning != "" {
		s += "; warning: " + b.Warning
	}
	return s
}

// Header is what a JPEG frame's SOF says (ParseHeader).
type Header struct {
	Width, Height int
	Components    int  // 1 grey, 3 YCbCr or RGB
	Precision     int  // bits per sample: 8
	SOF           byte // SOFBaseline, SOFExtended or SOFProgressive
}

// backend is one decoder implementation. Decode writes the 1/denom-scaled
// image as RGB24 rows of exactly 3*w bytes at the start of dst (denom 1
// only where Backend.FullScaleOnly).
type backend interface {
	decode(dst, src []byte, denom int) (w, h int, err error)
	close()
}

// Decoder decodes JPEG frames. It is safe for concurrent use (calls are
// serialised); give each camera its own.
type Decoder struct {
	mu      sync.Mutex
	b       backend
	info    Backend
	scratch []byte // image/jpeg: DHT insertion
}

// New returns a decoder on the backend opts and the environment select.
func New(opts Options) (*Decoder, error) {
	want := opts.Backend
	if want == "" {
		want = Auto
	}
	forced := ""
	if want == Auto {
		switch e := os.Getenv(EnvBackend); e {
		case "":
		case "go", Std:
			want, forced = Std, EnvBackend+"="+e
		case "turbojpeg", TurboJPEG:
			want, forced = TurboJPEG, EnvBackend+"="+e
		case "nvjpeg", NVJPEG:
			want, forced = NVJPEG, EnvBackend+"="+e
		default:
			return nil, fmt.Errorf("jpeg: %s=%q: want go, turbojpeg or nvjpeg", EnvBackend, e)
		}
	}
	var gpuWhy string // why nvJPEG, wanted by Auto, does not serve
	if want == NVJPEG || (want == Auto && opts.GPU != nil) {
		g := opts.GPU
		if g == nil {
			g = &GPU{}
		}
		s, path, err := acquireNV(g.Library, g.Device, !g.NoHardware)
		if err == nil {
			b := &nvBackend{s: s, direct: g.Direct}
			b.req.done = make(chan struct{}, 1)
			b.req.stage.d = s.dev
			kind := "hybrid backend (Huffman on the CPU, IDCT and colour on the GPU)"
			if s.dev.hw {
				kind = fmt.Sprintf("hardware JPEG engines (%d) for batches, hybrid backend for what they refuse", s.dev.engines)
			}
			why := fmt.Sprintf("loaded %s %s on CUDA device %d: %s", path, s.dev.version, g.Device, kind)
			if forced != "" {
				why = forced + ", " + why
			}
			return &Decoder{b: b, info: Backend{Name: NVJPEG, Why: why, FullScaleOnly: true}}, nil
		}
		if want == NVJPEG {
			return nil, err
		}
		gpuWhy = err.Error() + "; "
	}
	lib := opts.Library
	if lib == "" {
		lib = "libturbojpeg.so.0"
	}
	switch want {
	case Std:
		why := "backend = image/jpeg"
		if forced != "" {
			why = forced
		}
		return &Decoder{b: stdBackend{}, info: Backend{Name: Std, Why: why}}, nil
	case TurboJPEG, Auto:
		t, err := loadTurbo(lib)
		if err == nil {
			why := gpuWhy + "loaded " + t.path
			if forced != "" {
				why = forced + ", " + why
			}
			return &Decoder{b: t, info: Backend{Name: TurboJPEG, Why: why}}, nil
		}
		if want == TurboJPEG {
			return nil, fmt.Errorf("%w; %s", err, Install)
		}
		fix := Install
		if errors.Is(err, errNoCgo) {
			fix = "build edged with cgo (CGO_ENABLED=1) to load libjpeg-turbo"
		}
		return &Decoder{b: stdBackend{}, info: Backend{Name: Std, Why: gpuWhy + err.Error(),
			Warning: "MJPEG is decoded with image/jpeg, several times slower than libjpeg-turbo: " + fix}}, nil
	}
	return nil, fmt.Errorf("jpeg: backend %q: want %s, %s, %s or %s", want, Auto, NVJPEG, TurboJPEG, Std)
}

// Backend says which decoder serves and why.
func (d *Decoder) Backend() Backend { return d.info }

// Header reads the image size from the frame's SOF (ParseHeader: the same
// answer on every backend, and ErrUnsupported for a frame no backend
// decodes).
func (d *Decoder) Header(src []byte) (Header, error) {
	d.mu.Lock()
	closed := d.b == nil
	d.mu.Unlock()
	if closed {
		return Header{}, ErrClosed
	}
	if len(src) == 0 {
		return Header{}, fmt.Errorf("%w: empty buffer", ErrCorrupt)
	}
	return ParseHeader(src)
}

// Decode decodes src at 1/denom scale (denom 1, 2, 4 or 8) into dst as
// packed RGB24, rows 3*w bytes apart, and returns the decoded size,
// ScaledSize of the frame's size. A frame ParseHeader refuses never
// reaches the backend. On error dst's contents are unspecified.
func (d *Decoder) Decode(dst, src []byte, denom int) (w, h int, err error) {
	switch denom {
	case 1, 2, 4, 8:
	default:
		return 0, 0, fmt.Errorf("%w: 1/%d", ErrScale, denom)
	}
	if len(src) == 0 {
		return 0, 0, fmt.Errorf("%w: empty buffer", ErrCorrupt)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.b == nil {
		return 0, 0, ErrClosed
	}
	if _, err := ParseHeader(src); err != nil {
		return 0, 0, err
	}
	return d.b.decode(dst, src, denom)
}

// Close releases the backend; it is idempotent.
func (d *Decoder) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.b != nil {
		d.b.close()
		d.b = nil
	}
	return nil
}

// ScaledSize is the size of a 1/denom decode of a w×h image (TJSCALED).
func ScaledSize(w, h, denom int) (int, int) {
	return (w + denom - 1) / denom, (h + denom - 1) / denom
}

// Resize modes of ChooseScale, as preprocessing names them.
const (
	Stretch   = "stretch"
	Letterbox = "letterbox"
)

// ChooseScale picks the largest denominator (8, 4, 2, else 1) whose decode
// of a srcW×srcH image still has at least as many pixels in each axis as
// an engine input of dstW×dstH samples from it: the whole input for
// stretch, the scaled image inside the bands for letterbox. It returns the
// denominator and a sentence saying why. A zero destination means
// "unknown": full scale.
func ChooseScale(srcW, srcH, dstW, dstH int, resize string) (int, string) {
	if srcW <= 0 || srcH <= 0 || dstW <= 0 || dstH <= 0 {
		return 1, "engine input size not known: full scale"
	}
	if resize != Letterbox {
		resize = Stretch
	}
	needW, needH := dstW, dstH
	if resize == Letterbox {
		// The image covers round(src*r) of the input, r the smaller ratio.
		if dstW*srcH <= dstH*srcW { // width-bound
			needH = (srcH*dstW + srcW - 1) / srcW
		} else {
			needW = (srcW*dstH + srcH - 1) / srcH
		}
	}
	for _, d := range []int{8, 4, 2} {
		w, h := ScaledSize(srcW, srcH, d)
		if w >= needW && h >= needH {
			return d, fmt.Sprintf("1/%d: %dx%d decodes to %dx%d, at least the %dx%d pixels a %dx%d %s input samples", d, srcW, srcH, w, h, needW, needH, dstW, dstH, resize)
		}
	}
	return 1, fmt.Sprintf("1/1: 1/2 of %dx%d would be less than the %dx%d pixels a %dx%d %s input samples", srcW, srcH, needW, needH, dstW, dstH, resize)
}
