// Package mqttsink is the MQTT sink: records published to an MQTT 5 broker
// (eclipse/paho.golang autopaho) through a bounded, persistent queue.
//
// Publish encodes a record (NDJSON or CBOR, the socket's encodings, one
// record per message) into a bounded in-memory ring and returns: the
// pipeline never waits for the disk or the broker. The record's seq is
// assigned there, per sink, and travels with it. A writer goroutine
// appends the ring to the on-disk [Queue] (segment files of length + seq +
// CRC-32C framed records, fsynced every second); a publisher goroutine
// sends the queue in order, one message in flight, and advances a
// persisted cursor on PUBACK (QoS 1) or after the write (QoS 0). After a
// reconnect or a restart it starts again from the cursor: delivery is at
// least once, duplicates are possible, and within a run seq stays
// contiguous except where the ring or the queue's bound dropped the oldest
// records, or damage in the queue's files cost a record. Each run starts
// above every seq an earlier run used, whatever happened to the state
// folder (seq.go), with a sink_started record.
//
// A folder that cannot be used (full, read-only, unusable at start, a
// symbolic link out of the state folder) makes the queue keep records in
// memory (bounded) and try it again every 10 s. Every write to the broker
// has a deadline and every publish an ack timeout, so a broker that stops
// reading costs a reconnect, never a stalled pipeline.
//
// The sink itself never logs: it reports through Options.OnEvent, Stats,
// its Prometheus collector and the status function the daemon sets
// (SetStatusFunc); LogEvents is the OnEvent callback that logs those
// events as edged does, rate-limited (runtime/ratelog). It returns errors
// wrapping its sentinels (ErrAuth, ErrTLS, ErrConnect, ErrPublish,
// ErrDisk, ErrCorrupt, ErrTooLarge).
package mqttsink
