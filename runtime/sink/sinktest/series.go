package sinktest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Series registers c on a pedantic registry (which fails a collector
// whose descriptions do not match what it sends), gathers it once, and
// returns each series' value by name, with "/" and its reason label where
// it has one ("edged_stream_rejected_total/max_clients"). Every series
// must carry sink="name" and no label besides sink and reason.
func Series(t *testing.T, c prometheus.Collector, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			key, sink := mf.GetName(), ""
			for _, l := range m.Label {
				switch l.GetName() {
				case "sink":
					sink = l.GetValue()
				case "reason":
					key += "/" + l.GetValue()
				default:
					t.Errorf("%s: label %s", mf.GetName(), l.GetName())
				}
			}
			if sink != name {
				t.Errorf("%s: sink label %q, want %q", key, sink, name)
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

// Want fails t for every series of want that got lacks or has another
// value, and when got has series want does not name.
func Want(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for name, w := range want {
		if v, ok := got[name]; !ok || v != w {
			t.Errorf("%s = %v (exported: %v), want %v", name, v, ok, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s exported, not expected", name)
		}
	}
}
