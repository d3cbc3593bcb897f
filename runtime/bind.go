package runtime

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/postprocess"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/trt"
)

// enginePlan is how a pipeline uses an engine: the input preprocessing
// fills and how, and how each output is post-processed.
type enginePlan struct {
	in   int // index of the input preprocessing fills
	pre  preprocess.Options
	post []postprocess.Options // one per engine output, in order
}

// planEngine decides whether pipeline pc of c can run on an engine whose
// tensors are sig, and how. It is the one place that decides it: the
// daemon binds every pipeline with it (pipeline.bind, at start and on
// SIGHUP) and edged check asks it through CheckPipeline with the engine it
// loaded, so the two cannot disagree. Every problem is reported, each at
// the key that decides it; the error is a *config.Error.
func planEngine(c *config.Config, pc *config.Pipeline, sig trt.Signature) (enginePlan, error) {
	var probs []config.Problem
	add := func(key, format string, args ...any) { probs = append(probs, c.Problem(key, format, args...)) }
	i := indexIn(c.Pipelines, pc)
	at := func(key string) string { return fmt.Sprintf("pipeline[%d].%s", i, key) }
	pp := pc.Preprocess
	plan := enginePlan{in: -1}
	for j, t := range sig.Inputs {
		if pp.Input == "" || t.Name == pp.Input {
			plan.in = j
			break
		}
	}
	if plan.in < 0 {
		add(at("preprocess.input"), "model %q has no input %q (its inputs: %s)", pc.Model, pp.Input, specNames(sig.Inputs))
	} else {
		in := sig.Inputs[plan.in]
		key := at("preprocess.input")
		if pp.Layout != "auto" {
			key = at("preprocess.layout")
		}
		out, err := inputLayout(in, pp.Layout)
		if err != nil {
			add(key, "model %q input %s cannot be filled by preprocessing: %v", pc.Model, in, err)
		} else {
			plan.pre = preprocess.Options{
				Resize: pp.Resize, Filter: pp.Filter, Matrix: pp.ColorMatrix, FullRange: pp.ColorRange == "full",
				BGR: pp.Color == "bgr", Scale: float32(pp.Scale), Out: out, Threads: pp.Threads,
			}
			for ch := range min(len(pp.Mean), 3) {
				plan.pre.Mean[ch] = float32(pp.Mean[ch])
			}
			for ch := range min(len(pp.Std), 3) {
				plan.pre.Std[ch] = float32(pp.Std[ch])
			}
			if err := plan.pre.Validate(); err != nil {
				add(key, "model %q input %s: %v", pc.Model, in, err)
			}
		}
	}

	byName := map[string]int{}
	for j, t := range sig.Outputs {
		byName[t.Name] = j
	}
	conf := map[string]int{} // output name -> postprocess index
	for j, q := range pc.Postprocess {
		if _, ok := byName[q.Output]; !ok {
			add(fmt.Sprintf("pipeline[%d].postprocess[%d].output", i, j), "model %q has no output %q (its outputs: %s)", pc.Model, q.Output, specNames(sig.Outputs))
			continue
		}
		conf[q.Output] = j
	}
	for _, t := range sig.Outputs {
		o := postprocess.Options{Kind: postprocess.Raw, MaxValues: config.DefaultMaxValues}
		j, listed := conf[t.Name]
		if listed {
			q := pc.Postprocess[j]
			o = postprocess.Options{Kind: q.Kind, K: q.K, Softmax: q.Softmax, Labels: q.Labels, MaxValues: q.MaxValues,
				ScoreThreshold: float32(q.ScoreThreshold), IOUThreshold: float32(q.IOUThreshold), MaxDetections: q.MaxDetections}
		}
		if _, err := postprocess.New(t.Name, t.Shape, o); err != nil {
			key := at("model") // an output sent raw
			switch {
			case listed && errors.Is(err, postprocess.ErrLabels):
				key = fmt.Sprintf("pipeline[%d].postprocess[%d].labels", i, j)
			case listed:
				key = fmt.Sprintf("pipeline[%d].postprocess[%d].kind", i, j)
			}
			add(key, "model %q output %s: %v", pc.Model, t, err)
		}
		plan.post = append(plan.post, o)
	}
	if len(probs) > 0 {
		return enginePlan{}, &config.Error{Problems: probs}
	}
	return plan, nil
}

// CheckPipeline reports what keeps pipeline pc of c from running on an
// engine whose tensors are sig: an input that is missing or that
// preprocessing cannot fill, post-processing of outputs the engine does
// not have or whose shape does not suit it. It decides exactly as the
// daemon does when it binds the pipeline to its engine; edged check calls
// it with the engine it loaded. The error is a *config.Error whose problems
// name file:line:column and key.
func CheckPipeline(c *config.Config, pc *config.Pipeline, sig trt.Signature) error {
	_, err := planEngine(c, pc, sig)
	return err
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
