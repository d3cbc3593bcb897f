package socketsink

import (
	"testing"

	"github.com/edged-dev/edged/runtime/sink/sinktest"
	"github.com/edged-dev/edged/runtime/stream/streamtest"
)

// TestCollector: the sink's collector registers on a pedantic registry
// (its descriptions match what it sends) and exports the socket's series
// under the sink's name, with the values of Stats.
func TestCollector(t *testing.T) {
	s, ev := newSocket(t, Options{Name: "results"})
	c := dial(t, s, ev, nil)
	s.Publish(streamtest.Result("p", 1))
	next(t, c)
	waitSent(t, s, 1) // the writer counts the record after its peer may have read it
	sinktest.Want(t, sinktest.Series(t, s.Collector(), "results"), map[string]float64{
		"edged_stream_clients": 1, "edged_sink_records_sent_total": 1, "edged_sink_records_dropped_total": 0,
		"edged_stream_disconnects_total/any": 0, "edged_stream_disconnects_total/slow": 0, "edged_stream_disconnects_total/unread": 0,
		"edged_stream_rejected_total/any": 0, "edged_stream_rejected_total/max_clients": 0, "edged_stream_rejected_total/max_clients_per_uid": 0,
	})
}
