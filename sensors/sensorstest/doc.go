// Package sensorstest holds fakes for code that consumes sensors: a
// scripted camera Source, a scripted SampleSource, and slot pools whose
// memory is the Go heap or anonymous mmap.
//
// They are for unit tests of consumers (pipelines, schedulers) at the
// transport boundary; none of them is ever handed to a real device.
package sensorstest
