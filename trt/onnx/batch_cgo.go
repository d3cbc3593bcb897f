//go:build cgo && linux

package onnx

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/trt"
	ort "github.com/yalue/onnxruntime_go"
)

// batching is an engine's batch state (LoadOptions.Batch > 0): for each
// number of entries an inference may run, ORT tensors over the first
// entries of the one set of buffers and an I/O binding of them, all made
// at load, so a batch of any size allocates nothing. The set of the
// largest batch is the engine's own (inputs, outputs, binding).
type batching struct {
	dim  trt.BatchDim
	max  int // LoadOptions.Batch; 0: not batched
	runs int // entries the next inference runs
	top  int // entries of the largest batch
	sets []*batchSet
}

type batchSet struct {
	inputs, outputs []*trt.Tensor
	values          []ort.Value // made for this set (none for the top set)
	binding         *ort.IoBinding
}

// batchDimOf is the batch dimension of a model with inputs in: axis 0 of
// every input, symbolic or fixed alike in all.
func batchDimOf(in []ort.InputOutputInfo) (trt.BatchDim, error) {
	var bd trt.BatchDim
	for i, t := range in {
		if len(t.Dimensions) == 0 {
			return bd, fmt.Errorf("%w: input %q is a scalar, with no batch dimension", trt.ErrBatch, t.Name)
		}
		got := trt.BatchDim{Min: 1, Opt: 1}
		if d := t.Dimensions[0]; d >= 0 {
			got = trt.BatchDim{Min: int(d), Opt: int(d), Max: int(d), Fixed: true}
		}
		if i > 0 && got != bd {
			return bd, fmt.Errorf("%w: input %q's first dimension (%s) is not input %q's (%s): edged batches axis 0 of every input",
				trt.ErrBatch, t.Name, got, in[0].Name, bd)
		}
		bd = got
	}
	return bd, nil
}

// batchInputs returns the model's inputs with axis 0 fixed to the entries
// of the largest batch (a symbolic one; a fixed one must hold it), for
// specs to resolve the rest; in itself when batch is 0 (no batches). The
// batching returned is the engine's before its tensors are made.
func batchInputs(model string, in []ort.InputOutputInfo, batch int) ([]ort.InputOutputInfo, batching, error) {
	var b batching
	if bd, err := batchDimOf(in); err == nil {
		b.dim = bd
	} else if batch > 0 {
		return nil, b, fmt.Errorf("onnx: model %q: %w", model, err)
	}
	if batch <= 0 {
		return in, b, nil
	}
	top, err := b.dim.Fits(batch)
	if err != nil {
		return nil, b, fmt.Errorf("onnx: model %q: %w; export the model with a dynamic batch dimension (dynamic=True, or dynamic_axes={'%s': {0: 'batch'}}) or with batch %d",
			model, err, in[0].Name, batch)
	}
	out := make([]ort.InputOutputInfo, len(in))
	for i, t := range in {
		out[i] = t
		out[i].Dimensions = append(ort.Shape(nil), t.Dimensions...)
		out[i].Dimensions[0] = int64(top)
	}
	b.max, b.top, b.runs = batch, top, top
	return out, b, nil
}

// planBatches checks that every output has the batch on axis 0 and makes
// the tensors and binding of each smaller number of entries; the smallest
// runs once to show the model's outputs follow the batch.
func (e *engine) planBatches() error {
	b := &e.bat
	if b.max == 0 {
		return nil
	}
	for _, t := range e.outputs {
		if len(t.Shape) == 0 || t.Shape[0] != int64(b.top) {
			return fmt.Errorf("onnx: model %q: %w: output %s with %d entries in each input: its first dimension is not the batch",
				e.name, trt.ErrBatch, t.TensorSpec, b.top)
		}
	}
	b.sets = make([]*batchSet, b.top+1)
	b.sets[b.top] = &batchSet{inputs: e.inputs, outputs: e.outputs, binding: e.binding}
	smallest := b.top
	for n := 1; n < b.max; n++ {
		r, _ := b.dim.Fits(n)
		if b.sets[r] != nil {
			continue
		}
		set := &batchSet{}
		b.sets[r] = set
		smallest = min(smallest, r)
		var err error
		if set.binding, err = e.sess.s.CreateIoBinding(); err != nil {
			return fmt.Errorf("%w: onnx: model %q: creating an I/O binding: %w", trt.ErrBackend, e.name, err)
		}
		for _, side := range []struct {
			all  []*trt.Tensor
			dst  *[]*trt.Tensor
			bind func(string, ort.Value) error
		}{{e.inputs, &set.inputs, set.binding.BindInput}, {e.outputs, &set.outputs, set.binding.BindOutput}} {
			for _, t := range side.all {
				v, err := e.view(set, t, r, side.dst)
				if err != nil {
					return err
				}
				if err := side.bind(t.Name, v); err != nil {
					return fmt.Errorf("%w: onnx: model %q: binding %s: %w", trt.ErrBackend, e.name, t.TensorSpec, err)
				}
			}
		}
	}
	if smallest < b.top {
		if err := e.sess.s.RunWithBinding(b.sets[smallest].binding); err != nil {
			return fmt.Errorf("onnx: model %q: %w: an inference of %d entries failed (do the outputs follow the batch?): %s",
				e.name, trt.ErrBatch, smallest, unwrapORT(err))
		}
	}
	return nil
}

// view adds to set the tensor t as it is with r entries: an ORT tensor over
// the first r entries of t's memory.
func (e *engine) view(set *batchSet, t *trt.Tensor, r int, dst *[]*trt.Tensor) (ort.Value, error) {
	spec := trt.TensorSpec{Name: t.Name, Type: t.Type, Shape: append([]int64(nil), t.Shape...)}
	spec.Shape[0] = int64(r)
	host, err := t.Buf.Host()
	if err != nil {
		return nil, fmt.Errorf("%w: onnx: model %q tensor %s: %w", trt.ErrBackend, e.name, spec, err)
	}
	n := int(spec.Bytes())
	v, err := ort.NewCustomDataTensor(ort.NewShape(spec.Shape...), host[:n:n], ortType(spec.Type))
	if err != nil {
		return nil, fmt.Errorf("%w: onnx: model %q tensor %s: %w", trt.ErrBackend, e.name, spec, err)
	}
	set.values = append(set.values, v)
	*dst = append(*dst, &trt.Tensor{TensorSpec: spec, Buf: t.Buf})
	return v, nil
}

// freeBatches puts the largest batch's tensors and binding back as the
// engine's (Close releases those) and destroys the others'. Under e.mu.
func (e *engine) freeBatches() error {
	b := &e.bat
	if b.sets == nil {
		return nil
	}
	top := b.sets[b.top]
	e.inputs, e.outputs, e.binding = top.inputs, top.outputs, top.binding
	e.cur.Store(nil)
	var errs []error
	for r, set := range b.sets {
		if set == nil || r == b.top {
			continue
		}
		if set.binding != nil {
			errs = append(errs, set.binding.Destroy())
		}
		for _, v := range set.values {
			errs = append(errs, v.Destroy())
		}
	}
	b.sets = nil
	return errors.Join(errs...)
}

// BatchDim implements trt.Batched: the model's batch dimension (zero when
// its inputs have none).
func (e *engine) BatchDim() trt.BatchDim { return e.bat.dim }

// MaxBatch implements trt.Batched: LoadOptions.Batch.
func (e *engine) MaxBatch() int { return e.bat.max }

// Runs implements trt.Batched.
func (e *engine) Runs() int { return e.bat.runs }

// SetBatch implements trt.Batched: the next inferences run the binding of
// n frames' entries (a fixed batch dimension: all of them, padded).
func (e *engine) SetBatch(n int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := &e.bat
	switch {
	case e.closed:
		return trt.ErrClosed
	case b.max == 0:
		return fmt.Errorf("%w: the engine was not loaded for batches", trt.ErrBatch)
	case n < 1 || n > b.max:
		return fmt.Errorf("%w: a batch of %d frames; this engine takes 1 to %d", trt.ErrBatch, n, b.max)
	}
	r, _ := b.dim.Fits(n)
	set := b.sets[r]
	b.runs = r
	e.binding = set.binding // Infer's, under e.mu
	e.cur.Store(set)
	return nil
}

var _ trt.Batched = (*engine)(nil)
