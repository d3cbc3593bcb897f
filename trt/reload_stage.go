package trt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// StagingGate bounds how many engines are being staged (loaded and
// validated but not yet installed or closed) at once.
//
// Every Reloader uses one process-wide gate of one unless
// ReloaderOptions.Gate names another: on Jetson the GPU memory is the system
// DRAM, so two models staging at the same time compete for the same memory
// the serving engines use.
type StagingGate struct{ ch chan struct{} }

// NewStagingGate returns a gate admitting n stagings at a time (n < 1 means 1).
func NewStagingGate(n int) *StagingGate {
	return &StagingGate{ch: make(chan struct{}, max(n, 1))}
}

var processGate = NewStagingGate(1)

func (g *StagingGate) acquire(ctx context.Context) error {
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *StagingGate) release() { <-g.ch }

// stager runs the load-validate-warm-up transaction for one target.
type stager struct {
	backend Backend
	budget  Budget
	gate    *StagingGate
	warmup  time.Duration
}

// stage loads model for a target, checks it and warms it up. On success
// the gate is still held and the caller must call done after installing
// the engine; on failure nothing is held and every error wraps a trt
// sentinel, or is ctx's error when ctx ended.
func (s *stager) stage(ctx context.Context, model []byte, opts LoadOptions, want Signature) (e Engine, done func(), err error) {
	if err := s.gate.acquire(ctx); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			if e != nil {
				e.Close()
				e = nil
			}
			s.gate.release()
			if ctx.Err() != nil {
				err = ctx.Err()
			}
		}
	}()
	if s.budget != nil {
		if err := s.budget(int64(len(model))); err != nil {
			if !errors.Is(err, ErrMemory) {
				err = fmt.Errorf("%w: %w", ErrMemory, err)
			}
			return nil, nil, err
		}
	}
	e, err = s.backend.Load(ctx, model, opts)
	if err != nil {
		if RejectReason(err) == ReasonOther {
			err = fmt.Errorf("%w: %s backend: %w", ErrEngineInvalid, s.backend.Name(), err)
		}
		return nil, nil, err
	}
	if e == nil {
		return nil, nil, fmt.Errorf("%w: %s backend returned no engine", ErrEngineInvalid, s.backend.Name())
	}
	got := SignatureOf(e)
	if len(got.Inputs) == 0 || len(got.Outputs) == 0 {
		return e, nil, fmt.Errorf("%w: the engine has %d inputs and %d outputs, want at least one of each", ErrSignature, len(got.Inputs), len(got.Outputs))
	}
	if !want.empty() {
		if err := got.checkStaged(want); err != nil {
			return e, nil, fmt.Errorf("%w (pipelines are built for their engine's tensors: export the model with the same inputs and outputs, or restart edged to rebuild the pipeline for the new ones)", err)
		}
	}
	if err := warmup(ctx, e, want, s.warmup); err != nil {
		return e, nil, err
	}
	return e, s.gate.release, nil
}

func (s Signature) empty() bool { return len(s.Inputs) == 0 && len(s.Outputs) == 0 }

// checkStaged is Check for a freshly loaded engine, whose outputs may
// still have dynamic (-1) dimensions that only inference resolves: those
// match any dimension of want. warmup checks the resolved shapes.
func (s Signature) checkStaged(want Signature) error {
	adj := Signature{Inputs: s.Inputs, Outputs: make([]TensorSpec, len(s.Outputs))}
	for i, o := range s.Outputs {
		adj.Outputs[i] = o
		if i < len(want.Outputs) && len(o.Shape) == len(want.Outputs[i].Shape) && o.Elements() < 0 {
			shape := append([]int64(nil), o.Shape...)
			for j, d := range shape {
				if d < 0 {
					shape[j] = want.Outputs[i].Shape[j]
				}
			}
			adj.Outputs[i].Shape = shape
		}
	}
	return adj.Check(want)
}

// warmup fills the inputs deterministically, runs one inference and
// rejects errors, outputs that are still dynamic, smaller than their shape
// or different from want, and NaN or Inf values.
func warmup(ctx context.Context, e Engine, want Signature, timeout time.Duration) error {
	for _, t := range e.Inputs() {
		fillInput(t)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err := e.Infer(wctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: the inference did not finish within %s: %w", ErrWarmup, timeout, err)
		}
		return fmt.Errorf("%w: %w", ErrWarmup, err)
	}
	for _, t := range e.Outputs() {
		n := t.Bytes()
		if n < 0 {
			return fmt.Errorf("%w: output %s still has a dynamic shape after inference", ErrWarmup, t.TensorSpec)
		}
		if t.Buf == nil || int64(t.Buf.Len()) < n {
			l := 0
			if t.Buf != nil {
				l = t.Buf.Len()
			}
			return fmt.Errorf("%w: output %s needs %d bytes but its buffer has %d", ErrWarmup, t.TensorSpec, n, l)
		}
	}
	if !want.empty() {
		if err := SignatureOf(e).Check(want); err != nil {
			return fmt.Errorf("%w: after inference: %v", ErrWarmup, err)
		}
	}
	for _, t := range e.Outputs() {
		if i, v, ok := firstNonFinite(t); !ok {
			return fmt.Errorf("%w: output %s element %d is %v on the warm-up input (the model is broken or was exported wrongly; check it with the tool that built it)", ErrWarmup, t.TensorSpec, i, v)
		}
	}
	return nil
}

// fillInput writes a deterministic pattern into a host-visible input:
// values in [0, 1] for floats, a byte ramp for 8-bit types and zeros for
// wider integers and booleans (safe for index inputs). Inputs the CPU
// cannot reach are left as the backend allocated them.
func fillInput(t *Tensor) {
	if t.Buf == nil {
		return
	}
	b, err := t.Buf.Host()
	if err != nil || len(b) == 0 {
		return
	}
	n := t.Elements()
	if n < 0 || n*int64(t.Type.Size()) > int64(len(b)) {
		return
	}
	switch t.Type {
	case Float32:
		v := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
		for i := range v {
			v[i] = float32(i*7%256) / 255
		}
	case Float16:
		v := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
		for i := range v {
			v[i] = halfBits(float32(i*7%256) / 255)
		}
	case Uint8:
		for i := range b[:n] {
			b[i] = byte(i * 7)
		}
	case Int8:
		for i := range b[:n] {
			b[i] = byte(i * 7 % 128)
		}
	default:
		clear(b[:n*int64(t.Type.Size())])
	}
}

// halfBits converts a value in [0, 1] to IEEE half precision (truncating
// the mantissa); values below the half normal range become zero.
func halfBits(f float32) uint16 {
	bits := math.Float32bits(f)
	exp := int(bits>>23&0xff) - 127 + 15
	if exp <= 0 {
		return 0
	}
	return uint16(exp)<<10 | uint16(bits>>13&0x3ff)
}

// firstNonFinite scans a float output the CPU can read; ok is false at the
// first NaN or Inf. Other types and unreadable buffers pass.
func firstNonFinite(t *Tensor) (int, float64, bool) {
	if t.Buf == nil {
		return 0, 0, true
	}
	b, err := t.Buf.Host()
	if err != nil {
		// Device-only or stream-owned memory (umem.ErrNotHostAccessible,
		// umem.ErrOwnedByStream): the CPU cannot check it.
		return 0, 0, true
	}
	n := t.Elements()
	if n <= 0 || n*int64(t.Type.Size()) > int64(len(b)) {
		return 0, 0, true
	}
	switch t.Type {
	case Float32:
		v := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
		for i, x := range v {
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				return i, f, false
			}
		}
	case Float16:
		v := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
		for i, x := range v {
			if x&0x7c00 == 0x7c00 {
				f := math.Inf(1)
				if x&0x3ff != 0 {
					f = math.NaN()
				}
				return i, f, false
			}
		}
	}
	return 0, 0, true
}
