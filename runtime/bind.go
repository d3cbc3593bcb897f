package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/postprocess"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/trt"
)

// enginePlan is how a pipeline uses an engine: the input preprocessing
// fills and how, and how the outputs are post-processed.
type enginePlan struct {
	in   int // index of the input preprocessing fills
	pre  preprocess.Options
	post []postPlan // in the order of their first output
	// notes say what was decided from the model's metadata and shapes
	// (edged check prints them, the daemon logs them) and what looks
	// wrong without being an error.
	notes []string
}

// postPlan is one processor: the engine outputs it reads (indices, the
// first naming the result) and its options.
type postPlan struct {
	outputs []int
	opts    postprocess.Options
}

// planEngine decides whether pipeline pc of c can run on an engine whose
// tensors are sig and whose model file says md about itself (nil: nothing),
// and how. It is the one place that decides it: the daemon binds every
// pipeline with it (pipeline.bind, at start, on SIGHUP and for every
// engine a reload installs) and edged check asks it through CheckPipeline
// with the engine it loaded, so the two cannot disagree. Every problem is
// reported, each at the key that decides it; the error is a
// *config.Error.
func planEngine(c *config.Config, pc *config.Pipeline, sig trt.Signature, md *trt.Metadata) (enginePlan, error) {
	if pc.Batched() {
		// Preprocessing and post-processing see one entry of the batch.
		sig = entrySignature(sig)
	}
	b := &binder{c: c, pc: pc, sig: sig, md: md, i: indexIn(c.Pipelines, pc)}
	b.plan.in = -1
	b.planInput()
	b.planOutputs()
	if len(b.probs) > 0 {
		return enginePlan{}, &config.Error{Problems: b.probs}
	}
	return b.plan, nil
}

// binder collects a plan and its problems.
type binder struct {
	c     *config.Config
	pc    *config.Pipeline
	sig   trt.Signature
	md    *trt.Metadata
	i     int
	plan  enginePlan
	probs []config.Problem
	// labelProblem: the model's metadata names classes its outputs do
	// not have, which no default works around.
	labelProblem bool
}

func (b *binder) add(key, format string, args ...any) {
	b.probs = append(b.probs, b.c.Problem(key, format, args...))
}

func (b *binder) note(format string, args ...any) {
	b.plan.notes = append(b.plan.notes, fmt.Sprintf(format, args...))
}

func (b *binder) at(key string) string { return fmt.Sprintf("pipeline[%d].%s", b.i, key) }

func (b *binder) postAt(j int, key string) string {
	return fmt.Sprintf("pipeline[%d].postprocess[%d].%s", b.i, j, key)
}

// planInput picks the input preprocessing fills and checks it against the
// model's metadata (the input size it was exported for).
func (b *binder) planInput() {
	pp, pc := b.pc.Preprocess, b.pc
	for j, t := range b.sig.Inputs {
		if pp.Input == "" || t.Name == pp.Input {
			b.plan.in = j
			break
		}
	}
	if b.plan.in < 0 {
		b.add(b.at("preprocess.input"), "model %q has no input %q (its inputs: %s)", pc.Model, pp.Input, specNames(b.sig.Inputs))
		return
	}
	in := b.sig.Inputs[b.plan.in]
	key := b.at("preprocess.input")
	if pp.Layout != "auto" {
		key = b.at("preprocess.layout")
	}
	out, err := inputLayout(in, pp.Layout)
	if err != nil {
		b.add(key, "model %q input %s cannot be filled by preprocessing: %v", pc.Model, in, err)
		return
	}
	b.plan.pre = preprocess.Options{
		Resize: pp.Resize, Filter: pp.Filter, Matrix: pp.ColorMatrix, FullRange: pp.ColorRange == "full",
		BGR: pp.Color == "bgr", Scale: float32(pp.Scale), Out: out, Threads: pp.Threads,
	}
	for ch := range min(len(pp.Mean), 3) {
		b.plan.pre.Mean[ch] = float32(pp.Mean[ch])
	}
	for ch := range min(len(pp.Std), 3) {
		b.plan.pre.Std[ch] = float32(pp.Std[ch])
	}
	if err := b.plan.pre.Validate(); err != nil {
		b.add(key, "model %q input %s: %v", pc.Model, in, err)
	}
	b.checkImgsz(out)
}

// checkImgsz compares the input size with the one the model's metadata
// says it was exported for. A fixed input that contradicts it is a broken
// export; a dynamic input set to another size runs, less accurately
// perhaps, so that is a note.
func (b *binder) checkImgsz(out preprocess.Output) {
	md := b.md
	if md == nil || len(md.Imgsz) != 2 {
		return
	}
	h, w := md.Imgsz[0], md.Imgsz[1]
	pp := b.pc.Preprocess
	dynamic := pp.Width > 0 && pp.Height > 0
	switch {
	case out.H == h && out.W == w:
	case dynamic:
		b.note("the model was exported for %dx%d (%s imgsz) and runs at %dx%d (preprocess.width and height)", w, h, md.From, out.W, out.H)
	default:
		b.add(b.at("model"), "model %q has a %dx%d input, but its %s says it was exported for %dx%d (imgsz): export it again",
			b.pc.Model, out.W, out.H, md.From, w, h)
	}
	if s := md.Stride; s > 0 && (out.W%s != 0 || out.H%s != 0) {
		b.note("the input size %dx%d is not a multiple of the model's stride %d", out.W, out.H, s)
	}
}

// labels are the class names for postprocess table q: its own, else the
// model's metadata's.
func (b *binder) labels(q *config.Postprocess) ([]string, bool) {
	if len(q.Labels) > 0 {
		return q.Labels, false
	}
	if names := b.md.ClassNames(); names != nil {
		return names, true
	}
	return nil, false
}

// planOutputs plans the post-processing of every output: the configured
// tables, then, for the first output when no table names it, what the
// model's task implies, and raw for the rest.
func (b *binder) planOutputs() {
	outs := b.sig.Outputs
	byName := map[string]int{}
	for j, t := range outs {
		byName[t.Name] = j
	}
	tables := slices.Clone(b.pc.Postprocess)
	listed := map[int]int{} // output index -> table index
	for j, q := range tables {
		o, ok := byName[q.Output]
		if !ok {
			b.add(b.postAt(j, "output"), "model %q has no output %q (its outputs: %s)", b.pc.Model, q.Output, specNames(outs))
			continue
		}
		listed[o] = j
	}
	if _, ok := listed[0]; !ok && len(outs) > 0 && len(b.probs) == 0 {
		if q, ok := taskDefault(b.md, outs[0]); ok {
			tables = append(tables, q)
			listed[0] = len(tables) - 1
			b.note("output %q: %s by default, as the model's %s says task %s", outs[0].Name, q.Kind, b.md.From, b.md.Task)
		}
	}
	used := map[int]bool{}
	raw := func(o int) postPlan {
		return postPlan{outputs: []int{o}, opts: postprocess.Options{Kind: postprocess.Raw, MaxValues: config.DefaultMaxValues}}
	}
	for o := range outs {
		j, ok := listed[o]
		if !ok {
			continue
		}
		if used[o] {
			if j < len(b.pc.Postprocess) {
				b.add(b.postAt(j, "output"), "output %q is read by another postprocess table's format already", outs[o].Name)
			}
			continue
		}
		implied := j >= len(b.pc.Postprocess)
		n := len(b.probs)
		pp, ok := b.planOutput(j, &tables[j], o, byName, implied)
		if !ok && implied && !b.labelProblem {
			// What the task suggests does not fit: send it raw, and say why.
			why := b.probs[n:]
			b.probs = b.probs[:n]
			b.note("output %q: sent raw: the model's task suggests %s, but %s", outs[o].Name, tables[j].Kind, why[0].Msg)
			pp, ok = raw(o), true
		}
		if !ok {
			continue
		}
		for _, k := range pp.outputs {
			if used[k] {
				b.add(b.postAt(j, "output"), "output %q is read by another postprocess table too", outs[k].Name)
			}
			used[k] = true
		}
		b.plan.post = append(b.plan.post, pp)
	}
	// Outputs no table reads are sent raw; the record lists the results
	// in the order of their first output.
	for o := range outs {
		if !used[o] {
			if _, ok := listed[o]; !ok {
				b.plan.post = append(b.plan.post, raw(o))
			}
		}
	}
	slices.SortStableFunc(b.plan.post, func(x, y postPlan) int { return x.outputs[0] - y.outputs[0] })
}

// taskDefault is the post-processing the model's task implies for its
// first output when no table names it.
func taskDefault(md *trt.Metadata, out trt.TensorSpec) (config.Postprocess, bool) {
	if md == nil {
		return config.Postprocess{}, false
	}
	q := config.Postprocess{Output: out.Name, Format: postprocess.FormatAuto, ScoreThreshold: config.DefaultScoreThreshold,
		IOUThreshold: config.DefaultIOUThreshold, MaxDetections: config.DefaultMaxDetections}
	switch md.Task {
	case trt.TaskDetect, trt.TaskSegment:
		q.Kind = postprocess.Detections
	case trt.TaskPose:
		q.Kind = postprocess.Keypoints
	case trt.TaskClassify:
		q = config.Postprocess{Output: out.Name, Kind: postprocess.TopK, K: config.DefaultTopK}
	default:
		return config.Postprocess{}, false
	}
	return q, true
}

// planOutput plans table j (q), which names output o.
func (b *binder) planOutput(j int, q *config.Postprocess, o int, byName map[string]int, implied bool) (postPlan, bool) {
	outs := b.sig.Outputs
	labels, fromMeta := b.labels(q)
	opts := postprocess.Options{Name: q.Output, Kind: q.Kind, K: q.K, Softmax: q.Softmax, Labels: labels, MaxValues: q.MaxValues,
		ScoreThreshold: float32(q.ScoreThreshold), IOUThreshold: float32(q.IOUThreshold), MaxDetections: q.MaxDetections,
		Sigmoid: q.Sigmoid, InputW: b.plan.pre.Out.W, InputH: b.plan.pre.Out.H}
	kindKey := b.postAt(j, "kind")
	if implied {
		kindKey = b.at("model")
	}
	pp := postPlan{outputs: []int{o}}
	if q.Kind == postprocess.Detections || q.Kind == postprocess.Keypoints {
		var explicit []int
		for _, n := range q.Outputs {
			k, ok := byName[n]
			if !ok {
				b.add(b.postAt(j, "outputs"), "model %q has no output %q (its outputs: %s)", b.pc.Model, n, specNames(outs))
				return postPlan{}, false
			}
			explicit = append(explicit, k)
		}
		req := postprocess.Request{Kind: q.Kind, Format: q.Format, Output: o, Outputs: explicit, Labels: len(labels), Metadata: b.md}
		ch, err := postprocess.Choose(req, outs)
		if err != nil && fromMeta {
			// Does it fit without the metadata's class names? Then they
			// contradict the output: the model file is wrong.
			req.Labels = 0
			if c, err2 := postprocess.Choose(req, outs); err2 == nil {
				b.labelProblem = true
				b.add(kindKey, "model %q output %s: %v: %s has %d classes, but the model's %s names %d; set labels for the output",
					b.pc.Model, outs[o], postprocess.ErrLabels, c.Format, c.Classes, b.md.From, len(labels))
				return postPlan{}, false
			}
		}
		if err != nil {
			// An ambiguity is settled by format; a format that does not
			// fit is the format's problem when it was set, else the kind's.
			key := kindKey
			switch {
			case implied:
			case errors.Is(err, postprocess.ErrAmbiguous) || q.Format != postprocess.FormatAuto:
				key = b.postAt(j, "format")
			case errors.Is(err, postprocess.ErrLabels) && len(q.Labels) > 0:
				key = b.postAt(j, "labels")
			}
			b.add(key, "model %q output %s: %v", b.pc.Model, outs[o], err)
			return postPlan{}, false
		}
		pp.outputs = ch.Inputs
		opts.Format, opts.Classes, opts.Extra = ch.Format, ch.Classes, ch.Extra
		opts.KeypointCount, opts.KeypointDims = ch.KeypointCount, ch.KeypointDims
		b.note("output %q: %s, format %s (%s)%s", outs[o].Name, q.Kind, ch.Format, ch.Why, readsToo(outs, ch.Inputs, o))
		b.noteLogits(q, opts, outs, ch.Inputs)
	}
	specs := make([]trt.TensorSpec, len(pp.outputs))
	for k, idx := range pp.outputs {
		specs[k] = outs[idx]
	}
	if _, err := postprocess.New(specs, opts); err != nil {
		key := kindKey
		switch {
		case errors.Is(err, postprocess.ErrLabels) && fromMeta:
			b.labelProblem = true
			err = fmt.Errorf("%w (the labels are the class names in the model's %s: set labels for the output)", err, b.md.From)
		case errors.Is(err, postprocess.ErrLabels):
			key = b.postAt(j, "labels")
		}
		b.add(key, "model %q output %s: %v", b.pc.Model, outs[o], err)
		return postPlan{}, false
	}
	if fromMeta {
		b.note("output %q: %d labels from the model's %s", outs[o].Name, len(labels), b.md.From)
	}
	pp.opts = opts
	return pp, true
}

// readsToo names the outputs besides o that a multi-output format reads.
func readsToo(outs []trt.TensorSpec, idx []int, o int) string {
	var names []string
	for _, k := range idx {
		if k != o {
			names = append(names, fmt.Sprintf("%q", outs[k].Name))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ", reading " + strings.Join(names, ", ") + " with it"
}

// noteLogits warns about an RT-DETR scores output named like logits that
// is read without the logistic function.
func (b *binder) noteLogits(q *config.Postprocess, o postprocess.Options, outs []trt.TensorSpec, idx []int) {
	if o.Format != postprocess.FormatRTDETR || q.Sigmoid || len(idx) != 2 || !strings.Contains(strings.ToLower(outs[idx[1]].Name), "logit") {
		return
	}
	b.note("output %q looks like logits: set sigmoid = true for the output if its scores are not probabilities", outs[idx[1]].Name)
}

// CheckPipeline reports what keeps pipeline pc of c from running on an
// engine whose tensors are sig and whose model file says md (nil:
// nothing): an input that is missing or that preprocessing cannot fill,
// post-processing of outputs the engine does not have or whose shape does
// not suit it. It decides exactly as the daemon does when it binds the
// pipeline to its engine; edged check calls it with the engine it loaded.
// The notes say how each output will be read and what was taken from the
// metadata. The error is a *config.Error whose problems name
// file:line:column and key.
func CheckPipeline(c *config.Config, pc *config.Pipeline, sig trt.Signature, md *trt.Metadata) (notes []string, err error) {
	p, err := planEngine(c, pc, sig, md)
	return p.notes, err
}

func specNames(ts []trt.TensorSpec) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", t.Name)
	}
	return "[" + s + "]"
}
