package reload

import (
	"github.com/edged-dev/edged/trt"

	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"
)

// StagingGate bounds how many engines are being staged (loaded and
// validated but not yet installed or closed) at once.
//
// Every Reloader uses one process-wide gate of one unless
// Options.Gate names another: on Jetson the GPU memory is the system
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

// StageOptions configure Stage.
type StageOptions struct {
	// Backend loads the engine.
	Backend trt.Backend
	// Budget is asked with the model size before the engine is created;
	// nil means MemInfoBudget{}.Check.
	Budget Budget
	// Gate bounds concurrent stagings; nil means the process-wide gate of
	// one, shared with every Reloader.
	Gate *StagingGate
	// WarmupTimeout bounds the warm-up inference; 0 means
	// DefaultWarmupTimeout.
	WarmupTimeout time.Duration
	// Model, when set, gives the model's bytes to StageSet called
	// without them (sharing from an engine already loaded) for a target
	// that cannot share after all and needs an engine of its own, as it
	// would get had the bytes been at hand. So edged check, which shares
	// from the engine it loaded, fails no model that run serves. It is
	// called at most once per StageSet, only then.
	Model func() ([]byte, error)
}

// Staged is an engine that passed Stage and is not installed yet. It holds
// the staging gate until Install or Close.
type Staged struct {
	// Engine is the validated, warmed-up engine.
	Engine trt.Engine
	gate   *StagingGate
	once   sync.Once
}

// Stage is the reload transaction's validation step, the one way edged
// accepts an engine: the Reloader stages every engine it installs through
// it, and so do the built-in model, the last-good fallback and edged
// check. Under the staging gate (one staging engine in the process unless
// o.Gate says otherwise) and after the memory budget allows a model of
// this size, it loads model with o.Backend, requires at least one input
// and one output and, when want is not empty, want's signature, and runs a
// warm-up inference bounded by o.WarmupTimeout whose outputs must be
// resolved, fit their buffers, match want and be finite.
//
// On success the caller must Install or Close the result promptly: it
// holds the gate. On failure nothing is held, and the error wraps a trt
// sentinel (ErrMemory, ErrEngineInvalid, ErrSignature, ErrWarmup, ...) or
// is ctx's error when ctx ended.
func Stage(ctx context.Context, model []byte, load trt.LoadOptions, want trt.Signature, o StageOptions) (_ *Staged, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := o.Gate.acquire(ctx); err != nil {
		return nil, err
	}
	e, err := loadStaged(ctx, model, load, want, o)
	if err != nil {
		o.Gate.release()
		return nil, err
	}
	return &Staged{Engine: e, gate: o.Gate}, nil
}

// loadStaged is Stage's work once the gate is held: the budget, the load, the
// signature checks and the warm-up. On error nothing is left open.
func loadStaged(ctx context.Context, model []byte, load trt.LoadOptions, want trt.Signature, o StageOptions) (e trt.Engine, err error) {
	defer func() {
		if err != nil {
			if e != nil {
				e.Close()
				e = nil
			}
			if ctx.Err() != nil {
				err = ctx.Err()
			}
		}
	}()
	if err := o.Budget(int64(len(model))); err != nil {
		if !errors.Is(err, trt.ErrMemory) {
			err = fmt.Errorf("%w: %w", trt.ErrMemory, err)
		}
		return nil, err
	}
	load.Want = want
	e, err = o.Backend.Load(ctx, model, load)
	if err != nil {
		switch {
		case trt.RejectReason(err) == trt.ReasonOther:
			err = fmt.Errorf("%w: %s backend: %w", trt.ErrEngineInvalid, o.Backend.Name(), err)
		case errors.Is(err, trt.ErrSignature) && !unset(want):
			err = fmt.Errorf("%w%s", err, signatureHint)
		}
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("%w: %s backend returned no engine", trt.ErrEngineInvalid, o.Backend.Name())
	}
	return e, validate(ctx, e, want, o.WarmupTimeout)
}

// validate checks a new engine's signature (at least one input and
// output; want's when it is set) and warms it up.
func validate(ctx context.Context, e trt.Engine, want trt.Signature, timeout time.Duration) error {
	got := trt.SignatureOf(e)
	if len(got.Inputs) == 0 || len(got.Outputs) == 0 {
		return fmt.Errorf("%w: the engine has %d inputs and %d outputs, want at least one of each", trt.ErrSignature, len(got.Inputs), len(got.Outputs))
	}
	if !unset(want) {
		if err := checkStaged(got, want); err != nil {
			return fmt.Errorf("%w%s", err, signatureHint)
		}
	}
	return warmup(ctx, e, want, timeout)
}

func (o *StageOptions) defaults() error {
	if o.Budget == nil {
		o.Budget = MemInfoBudget{}.Check
	}
	if o.Gate == nil {
		o.Gate = processGate
	}
	if o.WarmupTimeout <= 0 {
		o.WarmupTimeout = DefaultWarmupTimeout
	}
	if o.Backend == nil {
		return fmt.Errorf("%w: no backend to stage the model with", trt.ErrBackend)
	}
	return nil
}

// Install puts the engine in h as model's content sha, releases the
// staging gate and returns the new generation.
func (s *Staged) Install(h *trt.Hot, model string, sha [32]byte) *trt.Generation {
	g := h.Install(s.Engine, model, sha)
	s.once.Do(s.gate.release)
	return g
}

// Close closes the engine without installing it (the caller only
// validated it, or refused it for reasons of its own) and releases the
// staging gate. It is idempotent; after Install it does nothing.
func (s *Staged) Close() error {
	var err error
	s.once.Do(func() {
		err = s.Engine.Close()
		s.gate.release()
	})
	return err
}

// signatureHint ends the message of an engine refused for its signature.
const signatureHint = " (pipelines are built for their engine's tensors: export the model with the same inputs and outputs, or restart edged to rebuild the pipeline for the new ones)"

// unset reports whether s has no tensors: no signature to check against.
func unset(s trt.Signature) bool { return len(s.Inputs) == 0 && len(s.Outputs) == 0 }

// checkStaged is s.Check(want) for a freshly loaded engine, whose outputs may
// still have dynamic (-1) dimensions that only inference resolves: those
// match any dimension of want. warmup checks the resolved shapes.
func checkStaged(s, want trt.Signature) error {
	adj := trt.Signature{Inputs: s.Inputs, Outputs: make([]trt.TensorSpec, len(s.Outputs))}
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
func warmup(ctx context.Context, e trt.Engine, want trt.Signature, timeout time.Duration) error {
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
			return fmt.Errorf("%w: the inference did not finish within %s: %w", trt.ErrWarmup, timeout, err)
		}
		return fmt.Errorf("%w: %w", trt.ErrWarmup, err)
	}
	for _, t := range e.Outputs() {
		n := t.Bytes()
		if n < 0 {
			return fmt.Errorf("%w: output %s still has a dynamic shape after inference", trt.ErrWarmup, t.TensorSpec)
		}
		if t.Buf == nil || int64(t.Buf.Len()) < n {
			l := 0
			if t.Buf != nil {
				l = t.Buf.Len()
			}
			return fmt.Errorf("%w: output %s needs %d bytes but its buffer has %d", trt.ErrWarmup, t.TensorSpec, n, l)
		}
	}
	if !unset(want) {
		if err := trt.SignatureOf(e).Check(want); err != nil {
			return fmt.Errorf("%w: after inference: %w", trt.ErrWarmup, err)
		}
	}
	for _, t := range e.Outputs() {
		if i, v, ok := firstNonFinite(t); !ok {
			return fmt.Errorf("%w: output %s element %d is %v on the warm-up input (the model is broken or was exported wrongly; check it with the tool that built it)", trt.ErrWarmup, t.TensorSpec, i, v)
		}
	}
	return nil
}

// fillInput writes a deterministic pattern into a host-visible input:
// values in [0, 1] for floats, a byte ramp for 8-bit types and zeros for
// wider integers and booleans (safe for index inputs). Inputs the CPU
// cannot reach are left as the backend allocated them.
func fillInput(t *trt.Tensor) {
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
	case trt.Float32:
		v := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
		for i := range v {
			v[i] = float32(i*7%256) / 255
		}
	case trt.Float16:
		v := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
		for i := range v {
			v[i] = halfBits(float32(i*7%256) / 255)
		}
	case trt.Uint8:
		for i := range b[:n] {
			b[i] = byte(i * 7)
		}
	case trt.Int8:
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
func firstNonFinite(t *trt.Tensor) (int, float64, bool) {
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
	case trt.Float32:
		v := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
		for i, x := range v {
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				return i, f, false
			}
		}
	case trt.Float16:
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

// Set is one model's engines for several targets (the pipelines naming
// the model), validated and not installed yet: StageSet's result.
type Set struct {
	// Engines holds one engine per target, in the order of the loads
	// StageSet was given. Engines that share one model (trt.Sharer) hold
	// its weights once.
	Engines []trt.Engine
	// Separate counts the targets that got an engine of their own because
	// sharing was not possible (see share).
	Separate int
	gate     *StagingGate // held until Install or Close; nil when not held
	once     sync.Once
	model    []byte // read through StageOptions.Model, at most once
}

// StageSet stages model for every target at once, so that a model file
// shared by several pipelines is loaded and validated once. Without from,
// the model goes through Stage for the first target (the staging gate,
// the memory budget, its signature, the warm-up); every other target gets
// an engine shared from that one (trt.Sharer), checked against its own
// signature (wants[i]) and warmed up on its own tensors, loads[i] shaping
// them. With from, an engine already serving this content, every target
// shares from it and nothing is loaded: no gate, no budget, the weights
// are in memory. A backend whose engines do not share loads one engine
// per target, each within the budget, under the gate.
//
// On error nothing is held; failed is the index of the target whose
// engine failed and the error wraps a trt sentinel as Stage's does. On
// success the caller must Install or Close the set promptly.
func StageSet(ctx context.Context, model []byte, from trt.Engine, loads []trt.LoadOptions, wants []trt.Signature, o StageOptions) (_ *Set, failed int, err error) {
	if err := o.defaults(); err != nil {
		return nil, 0, err
	}
	if len(wants) != len(loads) {
		return nil, 0, fmt.Errorf("reload: StageSet: %d loads and %d signatures", len(loads), len(wants))
	}
	s := &Set{}
	defer func() {
		if err != nil {
			s.Close()
			s = nil
		}
	}()
	base := from
	if base == nil {
		st, err := Stage(ctx, model, loads[0], wants[0], o)
		if err != nil {
			return nil, 0, err
		}
		s.gate, base = st.gate, st.Engine
		s.Engines = append(s.Engines, st.Engine)
	}
	for i := len(s.Engines); i < len(loads); i++ {
		e, err := s.share(ctx, base, model, loads[i], wants[i], o)
		if err != nil {
			return nil, i, err
		}
		s.Engines = append(s.Engines, e)
	}
	return s, 0, nil
}

// share gives one more target an engine on base's model, or, when base
// cannot share or sharing fails, an engine of its own loaded from model.
// Sharing can fail where loading does not: TensorRT 8.5 (JetPack 5) lets
// each optimization profile of a dynamic-shape engine serve one execution
// context at a time, so a one-profile engine cannot get a second
// concurrent context; such a target costs a copy of the weights, as
// every pipeline did before engines were shared, instead of failing the
// model for all.
func (s *Set) share(ctx context.Context, base trt.Engine, model []byte, load trt.LoadOptions, want trt.Signature, o StageOptions) (e trt.Engine, err error) {
	sh, ok := base.(trt.Sharer)
	if !ok {
		return s.loadOwn(ctx, model, load, want, o, fmt.Errorf("the %s backend's engines cannot share their model", o.Backend.Name()))
	}
	load.Want = want
	if e, err = sh.Share(ctx, load); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(model) > 0 || o.Model != nil {
			return s.loadOwn(ctx, model, load, want, o, err)
		}
		if trt.RejectReason(err) == trt.ReasonOther {
			err = fmt.Errorf("%w: %s backend: sharing the engine: %w", trt.ErrEngineInvalid, o.Backend.Name(), err)
		}
		return nil, err
	}
	if err := validate(ctx, e, want, o.WarmupTimeout); err != nil {
		e.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return e, nil
}

// loadOwn loads a target's own engine from model, after why (sharing
// base's engine was not possible); Separate counts such targets.
func (s *Set) loadOwn(ctx context.Context, model []byte, load trt.LoadOptions, want trt.Signature, o StageOptions, why error) (trt.Engine, error) {
	if len(model) == 0 && o.Model != nil {
		if s.model == nil {
			b, err := o.Model()
			if err != nil {
				return nil, fmt.Errorf("%w: %w, and reading the model to load it again: %w", trt.ErrBackend, why, err)
			}
			s.model = b
		}
		model = s.model
	}
	if len(model) == 0 {
		return nil, fmt.Errorf("%w: %w, and the model's bytes are not at hand to load it again", trt.ErrBackend, why)
	}
	if s.gate == nil {
		if err := o.Gate.acquire(ctx); err != nil {
			return nil, err
		}
		s.gate = o.Gate
	}
	e, err := loadStaged(ctx, model, load, want, o)
	if err != nil {
		return nil, err
	}
	s.Separate++
	return e, nil
}

// Install puts Engines[i] in hots[i] as generation number of model's
// content sha, releases the staging gate and returns the generations.
func (s *Set) Install(hots []*trt.Hot, model string, sha [32]byte, number uint64) []*trt.Generation {
	gens := make([]*trt.Generation, len(s.Engines))
	for i, e := range s.Engines {
		gens[i] = hots[i].InstallAt(e, model, sha, number)
	}
	s.once.Do(s.release)
	return gens
}

// Close closes the engines without installing them and releases the
// staging gate. It is idempotent; after Install it does nothing.
func (s *Set) Close() error {
	var errs []error
	s.once.Do(func() {
		for _, e := range s.Engines {
			errs = append(errs, e.Close())
		}
		s.release()
	})
	return errors.Join(errs...)
}

func (s *Set) release() {
	if s.gate != nil {
		s.gate.release()
	}
}
