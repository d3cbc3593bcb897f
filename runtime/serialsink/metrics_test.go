package serialsink

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCollector: the sink's collector registers on a pedantic registry
// (its descriptions match what it sends) and exports the serial sink's
// series under the sink's name: the port is up once opened.
func TestCollector(t *testing.T) {
	_, path := newPty(t)
	s, ev := newSerialSink(t, Options{Name: "uart", Device: path, Baud: 115200})
	waitSerialEvent(t, ev, Opened)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if l := m.Label; len(l) != 1 || l[0].GetName() != "sink" || l[0].GetValue() != "uart" {
				t.Errorf("%s: labels %v", mf.GetName(), l)
			}
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"edged_serial_up": 1, "edged_sink_records_sent_total": 0, "edged_sink_records_dropped_total": 0,
		"edged_serial_reconnects_total": 0, "edged_serial_write_stalls_total": 0}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for name, w := range want {
		if v, ok := got[name]; !ok || v != w {
			t.Errorf("%s = %v (exported: %v), want %v", name, v, ok, w)
		}
	}
}
