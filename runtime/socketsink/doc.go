// Package socketsink is the Unix socket sink ([Sink]): it serves the result
// stream (runtime/stream's records and encodings) to local clients, each
// with its own bounded queue and seq, and takes their requests (subscribe,
// reload).
//
// Publish encodes a record once for every client, never blocks on a
// consumer, keeps no reference to the record and allocates nothing in
// steady state. Every client has a bounded queue that drops its oldest
// record when full.
//
// The socket file is bound in a private directory and renamed into place
// after its mode and group are set, so it is never reachable with wider
// permissions; a stale file is replaced, a live one refused. Under systemd
// socket activation the inherited listener is used instead (matched by
// FileDescriptorName= or path, [InheritedListener]) and left open on Close.
// Peers are identified with SO_PEERCRED ([PeerCred]) and may be limited to
// users and groups. Clients may send one JSON request per line; input is
// read through a fixed 4 KiB buffer. [Probe] is edged check's look at a
// path: what New would do, undone.
//
// The sink itself never logs: it reports through Stats, its Prometheus
// collector and the OnClient callback; LogClients is the callback that
// logs those events as edged does, rate-limited (runtime/ratelog).
package socketsink
