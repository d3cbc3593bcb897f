package mqttsink

import (
	"net/url"
	"testing"

	"github.com/edged-dev/edged/runtime/sink/sinktest"
)

// TestCollector: the sink's collector registers on a pedantic registry
// (its descriptions match what it sends) and exports every MQTT series
// under the sink's name, from Stats: here a sink whose broker is not
// there, so it is not connected.
func TestCollector(t *testing.T) {
	u, _ := url.Parse("mqtt://127.0.0.1:1")
	s := newTestSink(t, Options{Name: "cloud", URL: u, QoS: 1}, nil)
	got := sinktest.Series(t, s.Collector(), "cloud")
	for _, name := range []string{"edged_sink_queue_records", "edged_sink_queue_bytes"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not exported", name)
		}
		delete(got, name) // the sink_started record, queued or not yet
	}
	sinktest.Want(t, got, map[string]float64{
		"edged_sink_connected": 0, "edged_sink_records_sent_total": 0, "edged_sink_records_dropped_total": 0,
		"edged_sink_dropped_total/queue_full": 0, "edged_sink_dropped_total/refused": 0, "edged_sink_dropped_total/damaged": 0,
		"edged_sink_errors_total/auth": 0, "edged_sink_errors_total/tls": 0, "edged_sink_errors_total/connect": got["edged_sink_errors_total/connect"],
		"edged_sink_errors_total/publish": 0, "edged_sink_errors_total/disk": 0, "edged_sink_queue_degraded": 0,
	})
}
