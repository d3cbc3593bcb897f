package socketsink

import (
	"testing"
	"time"

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
	// The writer counts a record once its write returned, which can be
	// after the peer has read it: wait for the count, then read the series.
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Sent < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the record was read but never counted as sent: %+v", s.Stats())
		}
	}
	sinktest.Want(t, sinktest.Series(t, s.Collector(), "results"), map[string]float64{
		"edged_stream_clients": 1, "edged_sink_records_sent_total": 1, "edged_sink_records_dropped_total": 0,
		"edged_stream_disconnects_total/any": 0, "edged_stream_disconnects_total/slow": 0, "edged_stream_disconnects_total/unread": 0,
		"edged_stream_rejected_total/any": 0, "edged_stream_rejected_total/max_clients": 0, "edged_stream_rejected_total/max_clients_per_uid": 0,
	})
}
