// Package stream is the result stream: the wire protocol (docs/PROTOCOL.md)
// and the sinks that carry it, a Unix socket ([Socket]) and a serial port
// ([Serial]), plus the client side that edged tail uses ([Dial], [Decoder],
// [AppendText]).
//
// Pipelines fill one reused [Record] per frame and call Publish on each sink
// they feed. Publish encodes the record once (hand-written appenders, no
// reflection), never blocks on a consumer, keeps no reference to the record
// and allocates nothing in steady state. Every consumer has a bounded queue
// that drops its oldest record when full; each record carries a sequence
// number counted per consumer stream, so a gap in seq is exactly the records
// that consumer lost.
//
// # Encodings
//
// NDJSON (one JSON object per line) and CBOR (RFC 8949) carry the same keys.
// On the socket a CBOR record is a 4-byte big-endian length and the map; on
// a serial port it is framed as COBS(CBOR ‖ CRC-32C) ‖ 0x00. JSON has no NaN
// or infinity: such numbers are written as null, in both encodings.
//
// # Socket
//
// The socket file is bound in a private directory and renamed into place
// after its mode and group are set, so it is never reachable with wider
// permissions; a stale file is replaced, a live one refused. Under systemd
// socket activation the inherited listener is used instead (matched by
// FileDescriptorName= or path) and left open on Close. Clients may send one
// JSON request per line (subscribe, reload); input is read through a fixed
// 4 KiB buffer.
//
// # Serial
//
// go.bug.st/serial's Write has no timeout and Close does not interrupt it,
// so the serial sink writes from one goroutine, watches every write against
// the time the baud rate needs, and on a stall closes the port, abandons
// that writer (at most one at a time) and reopens by path with capped,
// jittered backoff. A bare 0x00 is sent after every open so the receiver
// resynchronises.
//
// The package never logs: sinks report through Stats and the OnClient
// callback, and the daemon decides what to log.
package stream
