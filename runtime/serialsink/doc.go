// Package serialsink is the serial port sink ([Sink]): the result stream
// (runtime/stream's records) written to a UART as COBS(CBOR ‖ CRC-32C) ‖
// 0x00 frames or NDJSON lines, through a bounded queue that drops its
// oldest frame when full.
//
// go.bug.st/serial's Write has no timeout and Close does not interrupt it,
// so the sink writes from one goroutine, watches every write against the
// time the baud rate needs, and on a stall closes the port, abandons that
// writer (at most one at a time) and reopens by path with capped, jittered
// backoff. A bare 0x00 is sent after every open so the receiver
// resynchronises. [Probe] is edged check's look at a device; [OpenReader]
// opens a port for reading (edged tail -serial).
//
// The sink itself never logs: it reports through Stats, its Prometheus
// collector and the OnEvent callback; LogEvents is the callback that logs
// those events as edged does, rate-limited (runtime/ratelog).
package serialsink
