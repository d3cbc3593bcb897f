// Package backoff is edged's one retry policy and its one cancellable
// wait: a Policy's delays double from Min to Max, each drawn at random from
// the upper half of its step so that retries of many devices do not march
// in step, and Sleep waits unless its context ends first. runtime (sources,
// serial sensors, the serial sink, the socket's accept loop) and trt (the
// reload transaction's waits) use it; it has no state of its own.
package backoff
