// Package stream is the result protocol (docs/PROTOCOL.md): the records a
// pipeline publishes ([Record]), their encodings (NDJSON, length-prefixed
// CBOR, the serial framing COBS(CBOR ‖ CRC-32C) ‖ 0x00), the requests a
// client sends ([ParseRequest]), and the client side that edged tail uses
// ([Dial], [Decoder], [AppendText]). The sinks that carry it live in their
// own packages (runtime/socketsink, runtime/serialsink, runtime/mqttsink);
// this package knows no transport beyond the Unix socket a [Client] dials,
// so it imports neither a UART nor an MQTT library.
//
// Pipelines fill one reused [Record] per frame and call Publish on each sink
// they feed. A sink encodes the record once ([Encoded]: hand-written
// appenders, no reflection, no allocation in steady state) and splices each
// consumer's own seq in as it writes, so a gap in seq is exactly the
// records that consumer lost.
//
// # Encodings
//
// NDJSON (one JSON object per line) and CBOR (RFC 8949) carry the same keys.
// On the socket a CBOR record is a 4-byte big-endian length and the map; on
// a serial port it is framed as COBS(CBOR ‖ CRC-32C) ‖ 0x00. JSON has no NaN
// or infinity: such numbers are written as null, in both encodings. A
// record too large for a sink's limit is summarised: raw outputs lose their
// data, then outputs and sensors are dropped, and the record is marked
// "truncated".
//
// The package never logs.
package stream
