package trttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// Backend is a fake trt.Backend whose engines behave as their model file
// says. It is safe for concurrent use.
type Backend struct {
	// OnLoad, when set, runs at the start of every Load with the model
	// bytes; a non-nil error fails the load. Set it before first use.
	OnLoad func(ctx context.Context, model []byte) error

	mu         sync.Mutex
	loads      int
	loading    int
	maxLoading int
	live       int
	maxLive    int
	models     int
	maxModels  int
	loaded     [][32]byte

	useAfterClose atomic.Int64
	closeWhileUse atomic.Int64
	overlapInfer  atomic.Int64
	infers        atomic.Int64
	shares        atomic.Int64
}

// NewBackend returns a fake backend.
func NewBackend() *Backend { return &Backend{} }

// Name implements trt.Backend.
func (b *Backend) Name() string { return "fake" }

// Load implements trt.Backend.
func (b *Backend) Load(ctx context.Context, model []byte, opts trt.LoadOptions) (trt.Engine, error) {
	sum := sha256.Sum256(model)
	b.mu.Lock()
	b.loads++
	b.loading++
	b.maxLoading = max(b.maxLoading, b.loading)
	b.loaded = append(b.loaded, sum)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.loading--
		b.mu.Unlock()
	}()
	if b.OnLoad != nil {
		if err := b.OnLoad(ctx, model); err != nil {
			return nil, err
		}
	}
	spec, err := Parse(model)
	if err != nil {
		return nil, fmt.Errorf("fake: %s: %w", opts.Name, err)
	}
	if spec.Delay > 0 {
		t := time.NewTimer(spec.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	switch {
	case spec.VersionError:
		return nil, fmt.Errorf("fake: %s: %w: built by 8.6.1, library is 10.3.0", opts.Name, trt.ErrVersion)
	case spec.LoadError != "":
		return nil, fmt.Errorf("fake: %s: %w: %s", opts.Name, trt.ErrEngineInvalid, spec.LoadError)
	}
	w := &weights{b: b, spec: spec}
	b.mu.Lock()
	b.models++
	b.maxModels = max(b.maxModels, b.models)
	b.mu.Unlock()
	e, err := w.engine(opts)
	if err != nil {
		b.mu.Lock()
		b.models--
		b.mu.Unlock()
		return nil, err
	}
	return e, nil
}

// weights is one loaded model file, shared by the engines Share makes.
type weights struct {
	b    *Backend
	spec Spec
	refs atomic.Int64
}

func (w *weights) release() {
	if w.refs.Add(-1) == 0 {
		w.b.mu.Lock()
		w.b.models--
		w.b.mu.Unlock()
	}
}

// engine makes one more engine on w with tensors of its own.
func (w *weights) engine(opts trt.LoadOptions) (*Engine, error) {
	b, spec := w.b, w.spec
	alloc := opts.Alloc
	if alloc == nil {
		alloc = umem.NewHost()
	}
	e := &Engine{b: b, spec: spec, w: w}
	in, out := spec.tensors()
	for k, ts := range in {
		ts.Shape = append([]int64(nil), ts.Shape...)
		want := opts.Shapes[ts.Name]
		if want == nil {
			want = opts.Image.Resolve(ts.Name, k == 0, ts.Shape)
		}
		for i, d := range ts.Shape {
			if d < 0 && i < len(want) {
				ts.Shape[i] = want[i]
			}
		}
		if ts.Elements() < 0 {
			e.release()
			return nil, fmt.Errorf("fake: %s: input %s has a dynamic shape and LoadOptions.Shapes does not fix it", opts.Name, ts)
		}
		t, err := newTensor(alloc, ts, 0)
		if err != nil {
			e.release()
			return nil, err
		}
		e.in = append(e.in, t)
	}
	for _, ts := range out {
		ts.Shape = append([]int64(nil), ts.Shape...)
		short := 0
		if spec.ShortOutput {
			short = ts.Type.Size()
		}
		t, err := newTensor(alloc, ts, short)
		if err != nil {
			e.release()
			return nil, err
		}
		e.out = append(e.out, t)
	}
	w.refs.Add(1)
	b.mu.Lock()
	b.live++
	b.maxLive = max(b.maxLive, b.live)
	b.mu.Unlock()
	return e, nil
}

// Share implements trt.Sharer: another engine on the same loaded model,
// with tensors of its own. It counts as a live engine, not as a load.
func (e *Engine) Share(ctx context.Context, opts trt.LoadOptions) (trt.Engine, error) {
	if e.closed.Load() {
		e.b.useAfterClose.Add(1)
		return nil, trt.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.b.shares.Add(1)
	return e.w.engine(opts)
}

// Weights implements trt.Sharer.
func (e *Engine) Weights() any { return e.w }

// Models is the number of loaded models (Load calls that succeeded) whose
// engines are not all closed yet: the weights held.
func (b *Backend) Models() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.models
}

// MaxModels is the largest Models seen.
func (b *Backend) MaxModels() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxModels
}

// Shares counts the engines made by Share.
func (b *Backend) Shares() int64 { return b.shares.Load() }

func newTensor(alloc umem.Allocator, ts trt.TensorSpec, short int) (*trt.Tensor, error) {
	n := ts.Bytes()
	if n < 0 {
		// A dynamic output is sized by its static part.
		n = int64(ts.Type.Size())
		for _, d := range ts.Shape {
			if d > 0 {
				n *= d
			}
		}
	}
	buf, err := alloc.Alloc(int(max(n-int64(short), 1)))
	if err != nil {
		return nil, fmt.Errorf("fake: tensor %s: %w", ts, err)
	}
	return &trt.Tensor{TensorSpec: ts, Buf: buf}, nil
}

// Loads is the number of Load calls so far.
func (b *Backend) Loads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loads
}

// Loaded returns the SHA-256 of every byte string Load was given, in order.
func (b *Backend) Loaded() [][32]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][32]byte(nil), b.loaded...)
}

// Live is the number of engines loaded and not yet closed.
func (b *Backend) Live() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live
}

// MaxLive is the largest Live seen.
func (b *Backend) MaxLive() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxLive
}

// MaxConcurrentLoads is the largest number of Load calls in progress at
// once.
func (b *Backend) MaxConcurrentLoads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxLoading
}

// Misuse counts inferences on closed engines, closes during an inference
// and overlapping inferences on one engine. All three are bugs in the
// caller.
func (b *Backend) Misuse() (useAfterClose, closeWhileInfer, overlapping int64) {
	return b.useAfterClose.Load(), b.closeWhileUse.Load(), b.overlapInfer.Load()
}

// Infers counts successful inferences.
func (b *Backend) Infers() int64 { return b.infers.Load() }

// Engine is a fake engine.
type Engine struct {
	b        *Backend
	w        *weights
	spec     Spec
	in, out  []*trt.Tensor
	closed   atomic.Bool
	busy     atomic.Bool
	reshaped bool
	once     sync.Once
}

var _ trt.Engine = (*Engine)(nil)

// Spec is the model the engine was loaded from.
func (e *Engine) Spec() Spec { return e.spec }

// Backend implements trt.Engine.
func (e *Engine) Backend() string { return "fake" }

// Inputs implements trt.Engine.
func (e *Engine) Inputs() []*trt.Tensor { return e.in }

// Outputs implements trt.Engine.
func (e *Engine) Outputs() []*trt.Tensor { return e.out }

// errInfer is what an "infer-error" model's Infer returns.
var errInfer = errors.New("fake: scripted inference failure")

// Infer implements trt.Engine: every float32 output element becomes the
// model's value (the first one NaN or Inf when scripted).
func (e *Engine) Infer(ctx context.Context) error {
	if e.closed.Load() {
		e.b.useAfterClose.Add(1)
		return trt.ErrClosed
	}
	if !e.busy.CompareAndSwap(false, true) {
		e.b.overlapInfer.Add(1)
		return errors.New("fake: overlapping Infer calls on one engine")
	}
	defer e.busy.Store(false)
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.spec.InferError {
		return errInfer
	}
	for _, t := range e.out {
		v := t.Float32()
		if v == nil {
			continue
		}
		for i := range v {
			v[i] = e.spec.Value
		}
		if len(v) > 0 && e.spec.NaN {
			v[0] = float32(math.NaN())
		}
		if len(v) > 0 && e.spec.Inf {
			v[0] = float32(math.Inf(1))
		}
	}
	if e.spec.Reshape && !e.reshaped && len(e.out) > 0 {
		e.reshaped = true
		t := e.out[0]
		shape := append([]int64(nil), t.Shape...)
		shape[len(shape)-1]++
		t.Shape = shape
	}
	e.b.infers.Add(1)
	return nil
}

// Close implements trt.Engine. It is idempotent.
func (e *Engine) Close() error {
	if e.busy.Load() {
		e.b.closeWhileUse.Add(1)
	}
	e.once.Do(func() {
		e.closed.Store(true)
		e.release()
		e.b.mu.Lock()
		e.b.live--
		e.b.mu.Unlock()
		e.w.release()
	})
	return nil
}

func (e *Engine) release() {
	for _, t := range e.in {
		t.Buf.Release()
	}
	for _, t := range e.out {
		t.Buf.Release()
	}
}

// Sniff implements trt.Sniffer: a fake model starts with Header.
func (b *Backend) Sniff(head []byte, size int64) error {
	switch {
	case size == 0:
		return fmt.Errorf("%w: empty file", trt.ErrEngineInvalid)
	case !bytes.HasPrefix(head, []byte(Header)):
		return fmt.Errorf("%w: bad magic, want %q", trt.ErrEngineInvalid, Header)
	}
	return nil
}
