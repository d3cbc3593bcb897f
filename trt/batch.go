package trt

import "fmt"

// ErrBatch is wrapped when an engine cannot run the batch a pipeline asks
// for: no batch dimension, or one too small (a fixed dimension, a
// TensorRT optimization profile).
// It wraps ErrSignature: the engine does not fit the pipeline.
var ErrBatch = fmt.Errorf("%w: batch dimension", ErrSignature)

// BatchDim is an engine's batch dimension: axis 0 of each of its inputs
// and outputs.
type BatchDim struct {
	// Min, Opt and Max are the batch sizes the model runs: a TensorRT
	// optimization profile's, 1 and 0 (no limit) for a dynamic (symbolic)
	// ONNX dimension, the fixed size for a fixed one.
	Min, Opt, Max int
	// Fixed: the model fixes the dimension; every inference runs Max
	// entries, and those no frame fills are padding.
	Fixed bool
}

func (d BatchDim) String() string {
	switch {
	case d.Fixed:
		return fmt.Sprintf("fixed %d", d.Max)
	case d.Max == 0:
		return fmt.Sprintf("dynamic (from %d)", d.Min)
	}
	return fmt.Sprintf("dynamic %d..%d (opt %d)", d.Min, d.Max, d.Opt)
}

// Fits reports whether batches of up to n frames run on d, and how many
// entries a batch of n runs (more than n: padded).
func (d BatchDim) Fits(n int) (runs int, err error) {
	switch {
	case n < 1:
		return 0, fmt.Errorf("%w: a batch of %d", ErrBatch, n)
	case d.Fixed && n > d.Max:
		return 0, fmt.Errorf("%w: batch %d is more than the model's fixed batch dimension %d", ErrBatch, n, d.Max)
	case d.Fixed:
		return d.Max, nil
	case d.Max > 0 && n > d.Max:
		return 0, fmt.Errorf("%w: batch %d is beyond the engine's optimization profile (min %d, opt %d, max %d)", ErrBatch, n, d.Min, d.Opt, d.Max)
	}
	return max(n, d.Min), nil
}

// Batched is an engine loaded with LoadOptions.Batch: one inference runs
// up to MaxBatch frames, one per entry of axis 0 of every input and output.
// Entry i of a tensor lies at i × EntryBytes of its memory, whatever the
// batch size: the memory is bound once for the largest batch.
type Batched interface {
	Engine
	// BatchDim is the model's batch dimension.
	BatchDim() BatchDim
	// MaxBatch is LoadOptions.Batch: the most frames of an inference.
	MaxBatch() int
	// SetBatch makes the next inferences take n frames (1 to MaxBatch);
	// Inputs and Outputs then describe the tensors as the engine runs
	// them: Runs() entries, n or more (a fixed dimension, a profile's
	// min above n), of which entries n and beyond are padding whose
	// results mean nothing. A loaded engine is set to MaxBatch. It
	// allocates nothing.
	SetBatch(n int) error
	// Runs is the entries the next inference computes.
	Runs() int
}

// EntryBytes is the bytes of one entry of a batched tensor.
func EntryBytes(t *Tensor) int64 {
	if len(t.Shape) == 0 || t.Shape[0] <= 0 {
		return t.Bytes()
	}
	return t.Bytes() / t.Shape[0]
}
