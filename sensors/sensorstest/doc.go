// Package sensorstest holds fakes for code that consumes sensors: a
// scripted camera Source, a scripted SampleSource, and slot pools whose
// memory is the Go heap or anonymous mmap.
//
// They are for unit tests of consumers (pipelines, schedulers) at the
// transport boundary; none of them is ever handed to a real device.
//
// For the sources themselves it has CheckSource and CheckSampleSource:
// the contract every source keeps (a waiting Next wakes on cancel and on
// Close, Close is idempotent, no slot outlives it), checked the same way
// for every implementation, as periph's conntest does for connections.
package sensorstest
