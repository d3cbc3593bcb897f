// Package procfstest is for tests only: the resident memory of this
// process or a child, read through internal/procfs, with the skip a test
// wants where /proc is missing. The memory tests of runtime, trt/reload,
// trt/onnx and cmd/edged share it.
package procfstest
