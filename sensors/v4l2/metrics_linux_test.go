//go:build linux && (amd64 || arm64)

package v4l2

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edged-dev/edged/internal/metrictest"
)

// TestCollector: the camera's collector exports edged_camera_capture_mode
// for the memory mode a Start chose and edged_camera_events_total by
// event, labelled with the camera's name, with the values of Stats.
func TestCollector(t *testing.T) {
	r := newRig(t, Options{Name: "front", Memory: MemoryMmap}, 6, yuyvCam)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.src.Collector())
	if mfs := gather(t, reg); mfs["edged_camera_capture_mode"] != nil {
		t.Errorf("a capture mode before the first Start: %v", mfs["edged_camera_capture_mode"])
	}
	r.start()
	r.dev().push(event{}, event{kind: evError}, event{kind: evShort}, event{})
	for range 2 {
		r.next().Slot.Release()
	}
	mfs := gather(t, reg)
	if m := metrictest.Series(mfs, "edged_camera_capture_mode", "source", "front", "mode", "mmap"); m.GetGauge().GetValue() != 1 {
		t.Errorf("edged_camera_capture_mode{mode=mmap}: %v, want 1", m)
	}
	want := map[string]float64{"corrupt": 1, "short": 1, "decode": 0, "timeouts": 0, "restarts": 0, "gone": 0}
	if n := len(mfs["edged_camera_events_total"].GetMetric()); n != len(want) {
		t.Errorf("%d edged_camera_events_total series, want %d", n, len(want))
	}
	for event, v := range want {
		if m := metrictest.Series(mfs, "edged_camera_events_total", "source", "front", "event", event); m.GetCounter().GetValue() != v {
			t.Errorf("edged_camera_events_total{event=%q}: %v, want %v", event, m, v)
		}
	}
}

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		mfs[f.GetName()] = f
	}
	return mfs
}
