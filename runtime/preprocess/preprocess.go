package preprocess

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/edged-dev/edged/sensors"
)

// Preprocessor is the fast CPU path: it computes the function Options
// defines for one pipeline, frame after frame, with tables cached per
// source format and rows split across worker goroutines. Converting a
// frame allocates nothing once the tables for its format exist. Calls are
// serialised; Close stops the workers.
type Preprocessor struct {
	mu     sync.Mutex
	opt    Options
	closed bool
	yuv    *yuvTable
	simdK  *simdConsts // the vector kernels' constants, copied per worker
	// Per RGB channel: the gain and bias of the output channel it lands
	// in, and that channel (BGR reverses the order). With one output
	// channel the gain is the luma weight times channel 0's gain.
	gain, bias [3]float32
	chOf       [3]int
	padF       [3]float32 // padding per output channel
	padH       [3]uint16

	plan    *plan
	workers []*worker
	started bool
	exited  sync.WaitGroup // worker goroutines
	state   atomic.Uint64  // frame in progress: chunks<<32 | next to claim
	done    atomic.Uint32  // chunks finished
	fin     chan struct{}  // capacity 1: a worker finished the last chunk

	// The frame in progress, set by Run for the workers.
	src []byte
	f32 []float32
	f16 []uint16
}

// New validates o and returns a Preprocessor. Worker goroutines start on
// the first frame that needs them and run until Close.
func New(o Options) (*Preprocessor, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Resize == "" {
		o.Resize = Stretch
	}
	if o.Filter == "" {
		o.Filter = Bilinear
	}
	if o.Matrix == "" {
		o.Matrix = BT601
	}
	if o.Threads == 0 {
		o.Threads = min(runtime.GOMAXPROCS(0), 4)
	}
	p := &Preprocessor{opt: o, yuv: newYUVTable(ColorCoeffs(o.Matrix, o.FullRange))}
	a, b := o.Affine()
	luma := [3]float32{0.299, 0.587, 0.114}
	for k := range 3 {
		ch := k
		if o.BGR {
			ch = 2 - k
		}
		if o.Out.C == 1 {
			p.gain[k], p.bias[k] = luma[k]*a[0], b[0]
		} else {
			p.gain[k], p.bias[k], p.chOf[k] = a[ch], b[ch], ch
		}
		p.padF[k] = PadValue*a[k] + b[k]
		p.padH[k] = Half(p.padF[k])
	}
	p.simdK = newSIMDConsts(ColorCoeffs(o.Matrix, o.FullRange), p.bias)
	p.workers = make([]*worker, o.Threads)
	for i := range p.workers {
		p.workers[i] = &worker{p: p}
	}
	p.fin = make(chan struct{}, 1)
	return p, nil
}

// Options returns the options, with defaults filled in (Resize, Filter,
// Matrix, Threads).
func (p *Preprocessor) Options() Options { return p.opt }

// Run converts one frame of format f from src into dst, the output tensor
// (at least Options().Out.Bytes() bytes; float32 or float16 in native byte
// order), and returns the transform from tensor to source coordinates.
func (p *Preprocessor) Run(src []byte, f sensors.Format, dst []byte) (Transform, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Transform{}, fmt.Errorf("%w: Run after Close", ErrClosed)
	}
	if err := checkFrame(src, f); err != nil {
		return Transform{}, err
	}
	if err := checkTensor(dst, p.opt.Out); err != nil {
		return Transform{}, err
	}
	if !p.plan.matches(f) {
		p.setPlan(newPlan(f, p.opt, len(p.workers)))
	}
	n := p.opt.Out.C * p.opt.Out.H * p.opt.Out.W
	p.src = src
	if p.opt.Out.Half {
		p.f16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), n)
	} else {
		p.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(dst))), n)
	}
	p.runFrame()
	p.src, p.f32, p.f16 = nil, nil, nil
	return p.plan.g.Transform, nil
}

// Close stops the worker goroutines; Run fails afterwards. It is safe to
// call more than once.
func (p *Preprocessor) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.stopWorkers()
}

// setPlan installs the tables for a new format and sizes the workers'
// buffers for it.
func (p *Preprocessor) setPlan(pl *plan) {
	p.plan = pl
	n := 3 * pl.iw
	for _, w := range p.workers {
		w.hrow[0], w.hrow[1] = grow(w.hrow[0], n), grow(w.hrow[1], n)
		w.line = grow(w.line, pl.rowBuf)
		if haveSIMD && w.k == nil { // the vector kernels' constants (fused_simd.go)
			k := *p.simdK
			w.k = &k
		}
		if !pl.v2 {
			w.acc = grow(w.acc, n)
		}
		if p.opt.Out.Half || (p.opt.Out.NHWC && p.opt.Out.C == 3) {
			for k := range w.tmp {
				w.tmp[k] = grow(w.tmp[k], pl.iw)
			}
		}
		if p.opt.Out.Half && p.opt.Out.NHWC && p.opt.Out.C == 3 {
			w.il = grow(w.il, n)
		}
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
