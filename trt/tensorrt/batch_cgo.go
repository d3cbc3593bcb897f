//go:build tensorrt && cgo && linux

package tensorrt

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/edged-dev/edged/trt"
)

// batching is an engine's batch state: for each number of entries it may
// run, the tensors as they are then (over the one set of buffers) and the
// input shapes to set, all made at load so that a batch allocates nothing.
type batching struct {
	dim     trt.BatchDim
	max     int // LoadOptions.Batch; 0: not batched
	runs    int // entries the next inference runs
	applied int // entries the context's input shapes are set for
	byRuns  []*batchSet
	names   []*C.char // the inputs' names (C memory, freed at Close)
	dynamic []bool    // which inputs have a dynamic axis 0
}

type batchSet struct {
	inputs, outputs []*trt.Tensor
	dims            [][C.EDGED_TRT_MAX_DIMS]C.int64_t // per input
	nb              []C.int32_t
}

func (b *batching) free() {
	for _, n := range b.names {
		C.free(unsafe.Pointer(n))
	}
	b.names = nil
}

// planBatches makes the tensors and shapes of every batch of 1 to max
// frames, on the GPU's thread during build: the input shapes of each
// number of entries are set once to learn the outputs', then those of max.
func (e *Engine) planBatches(ins []tensorDesc, max int) error {
	b := &e.bat
	b.max = max
	top, _ := b.dim.Fits(max)
	b.byRuns = make([]*batchSet, top+1)
	for _, d := range ins {
		b.names = append(b.names, C.CString(d.Name))
		b.dynamic = append(b.dynamic, d.Dims[0] < 0)
	}
	for n := 1; n <= max; n++ {
		r, _ := b.dim.Fits(n)
		if b.byRuns[r] != nil {
			continue
		}
		set := &batchSet{dims: make([][C.EDGED_TRT_MAX_DIMS]C.int64_t, len(ins)), nb: make([]C.int32_t, len(ins))}
		for i, t := range e.inputs {
			shape := append([]int64(nil), t.Shape...)
			if b.dynamic[i] {
				shape[0] = int64(r)
			}
			for k, v := range shape {
				set.dims[i][k] = C.int64_t(v)
			}
			set.nb[i] = C.int32_t(len(shape))
			set.inputs = append(set.inputs, &trt.Tensor{TensorSpec: trt.TensorSpec{Name: t.Name, Type: t.Type, Shape: shape}, Buf: t.Buf})
		}
		if err := e.setShapes(set); err != nil {
			return err
		}
		for _, t := range e.outputs {
			shape, err := e.contextShape(t.Name)
			if err != nil {
				return err
			}
			if len(shape) == 0 || shape[0] != int64(r) {
				return fmt.Errorf("%w: output %q has shape %s with %d entries in each input: its first dimension is not the batch",
					trt.ErrBatch, t.Name, dimsString(shape), r)
			}
			spec := trt.TensorSpec{Name: t.Name, Type: t.Type, Shape: shape}
			if spec.Bytes() > t.Bytes() {
				return fmt.Errorf("%w: output %q is larger with %d entries (%s) than with %d", trt.ErrBatch, t.Name, r,
					dimsString(shape), top)
			}
			set.outputs = append(set.outputs, &trt.Tensor{TensorSpec: spec, Buf: t.Buf})
		}
		b.byRuns[r] = set
	}
	b.runs = top
	if err := e.setShapes(b.byRuns[top]); err != nil {
		return err
	}
	b.applied = top
	e.inputs, e.outputs = b.byRuns[top].inputs, b.byRuns[top].outputs
	e.cur.Store(b.byRuns[top])
	return nil
}

// setShapes sets the dynamic input shapes of set on the context (on the
// GPU's thread).
func (e *Engine) setShapes(set *batchSet) error {
	for i, dyn := range e.bat.dynamic {
		if !dyn {
			continue
		}
		if C.edged_trt_set_input_shape(e.h, e.bat.names[i], set.nb[i], &set.dims[i][0], &e.errbuf[0], errBufSize) != C.EDGED_TRT_OK {
			return fmt.Errorf("%w: %s", trt.ErrBatch, e.msg())
		}
	}
	return nil
}

// applyBatch sets the input shapes of the batch SetBatch chose, when they
// changed (on the GPU's thread, before the enqueue).
func (e *Engine) applyBatch() error {
	b := &e.bat
	if b.max == 0 || b.runs == b.applied {
		return nil
	}
	if err := e.setShapes(b.byRuns[b.runs]); err != nil {
		return fmt.Errorf("%w: %w", ErrInference, err)
	}
	b.applied = b.runs
	return nil
}

// BatchDim implements trt.Batched: the engine's batch dimension (zero
// when its inputs have none).
func (e *Engine) BatchDim() trt.BatchDim { return e.bat.dim }

// MaxBatch implements trt.Batched: LoadOptions.Batch.
func (e *Engine) MaxBatch() int { return e.bat.max }

// Runs implements trt.Batched.
func (e *Engine) Runs() int { return e.bat.runs }

// SetBatch implements trt.Batched. The input shapes are set on the
// execution context (setInputShape) before the next enqueueV3 when the
// number of entries changes.
func (e *Engine) SetBatch(n int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := &e.bat
	if e.closed {
		return trt.ErrClosed
	}
	if b.max == 0 {
		return fmt.Errorf("%w: the engine was not loaded for batches", trt.ErrBatch)
	}
	if n < 1 || n > b.max {
		return fmt.Errorf("%w: a batch of %d frames; this engine takes 1 to %d", trt.ErrBatch, n, b.max)
	}
	r, _ := b.dim.Fits(n)
	b.runs = r
	e.cur.Store(b.byRuns[r]) // Inputs and Outputs read it without e.mu
	return nil
}

var _ trt.Batched = (*Engine)(nil)
