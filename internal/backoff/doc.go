// Package backoff is edged's one retry policy and its one cancellable
// wait: a Policy's delays double from Min to Max, each drawn at random from
// the upper half of its step so that retries of many devices do not march
// in step, and Sleep waits unless its context ends first. A Retry applies
// a Policy to something that is restarted after it fails, counting a run
// that ended soon after its start as a failure too, so that no restart path
// spins. runtime (sources, serial sensors, the serial sink, the MQTT
// sink's connection, the socket's accept loop) and trt (the reload
// transaction's waits) use it.
package backoff
