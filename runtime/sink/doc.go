// Package sink is what every sink kind shares (runtime/socketsink,
// runtime/serialsink, runtime/mqttsink): the series every sink exports,
// [RecordsSent] and [RecordsDropped], labelled by the sink's name, so that
// each kind's collector reports them under one name and help text (a
// Prometheus registry refuses one name described two ways).
//
// The daemon sees a sink through its own interface (Publish, Run, Close)
// and, where the sink has one, its Prometheus collector; it names no kind.
package sink
