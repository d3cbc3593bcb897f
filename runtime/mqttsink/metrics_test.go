package mqttsink

import (
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCollector: the sink's collector registers on a pedantic registry
// (its descriptions match what it sends) and exports every MQTT series
// under the sink's name, from Stats: here a sink whose broker is not
// there, so it is not connected.
func TestCollector(t *testing.T) {
	u, _ := url.Parse("mqtt://127.0.0.1:1")
	s := newTestSink(t, Options{Name: "cloud", URL: u, QoS: 1}, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			n++
			name := mf.GetName()
			for _, l := range m.Label {
				switch l.GetName() {
				case "sink":
					if l.GetValue() != "cloud" {
						t.Errorf("%s: sink label %q", name, l.GetValue())
					}
				case "reason":
					name += "/" + l.GetValue()
				}
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if n != 14 {
		t.Errorf("%d series, want 14: %v", n, got)
	}
	for name, want := range map[string]float64{
		"edged_sink_connected": 0, "edged_sink_records_sent_total": 0, "edged_sink_queue_degraded": 0,
		"edged_sink_errors_total/auth": 0, "edged_sink_dropped_total/damaged": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported: %v), want %v", name, v, ok, want)
		}
	}
}
