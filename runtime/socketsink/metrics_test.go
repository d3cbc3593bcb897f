package socketsink

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			name := mf.GetName()
			for _, l := range m.Label {
				switch l.GetName() {
				case "sink":
					if l.GetValue() != "results" {
						t.Errorf("%s: sink label %q", name, l.GetValue())
					}
				case "reason":
					name += "/" + l.GetValue()
				}
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"edged_stream_clients": 1, "edged_sink_records_sent_total": 1, "edged_sink_records_dropped_total": 0,
		"edged_stream_disconnects_total/any": 0, "edged_stream_disconnects_total/slow": 0, "edged_stream_disconnects_total/unread": 0,
		"edged_stream_rejected_total/any": 0, "edged_stream_rejected_total/max_clients": 0, "edged_stream_rejected_total/max_clients_per_uid": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported: %v), want %v", name, v, ok, want)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d series, want 9: %v", len(got), got)
	}
}
