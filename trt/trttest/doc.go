// Package trttest provides a scriptable fake [trt.Backend] for tests of code
// that loads, validates and swaps engines.
//
// A fake model file is text: a header line, one directive per line and an
// "end" line, so a truncated or half-written file is recognisably invalid.
// [Spec] describes a model and renders it with [Spec.Bytes]; [Parse] reads
// it back. Directives script the behaviour the reload transaction must
// handle: output values, NaN or Inf outputs, wrong output sizes, load errors
// and load delays. [Backend] counts loads, live engines and misuse (an
// inference on a closed engine, a close during an inference) so tests can
// assert that none happened.
//
// The fake is for unit tests at the backend boundary only; the product
// uses the real backends in trt/onnx and trt/tensorrt.
package trttest
