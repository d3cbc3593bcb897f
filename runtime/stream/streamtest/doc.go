// Package streamtest holds the records the tests of the sinks publish: a
// typical detection result ([BenchRecord]) and a small classification
// result ([Result]). Tests only; the protocol's own tests keep their
// copies (an internal test of package stream cannot import a package that
// imports stream).
package streamtest
