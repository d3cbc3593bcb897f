package rtsp

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edged-dev/edged/internal/metrictest"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
)

// TestCollector: the camera's collector exports its pictures dropped by
// reason (every reason, zero on a lossless loopback), packets lost, frames
// by clock and the session's transport, labelled with the camera's name,
// with the values of Stats; STATUS= says the transport.
func TestCollector(t *testing.T) {
	dec := cpuDecoder(t)
	aus, _ := sample(t, h26x.H264, dec)
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	s, _, err := open(t, Options{Name: "door", URL: fs.URL, Transport: TransportTCP, Decoder: dec}, 6, 170*100*3/2)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		f.Slot.Release()
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	// Frames keep coming while the registry is read: the scrape's count
	// lies between Stats before it and after it.
	st0 := s.Stats()
	fams, err := reg.Gather()
	st := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	mfs := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		mfs[f.GetName()] = f
	}
	if n, want := len(mfs["edged_rtsp_frames_dropped_total"].GetMetric()), len(h26x.DropReasons())+1; n != want {
		t.Errorf("%d edged_rtsp_frames_dropped_total series, want %d (every reason and decoder)", n, want)
	}
	for _, r := range append(h26x.DropReasons(), 0) {
		reason := "decoder"
		if r != 0 {
			reason = r.String()
		}
		if m := metrictest.Series(mfs, "edged_rtsp_frames_dropped_total", "source", "door", "reason", reason); m == nil || m.GetCounter().GetValue() != 0 {
			t.Errorf("edged_rtsp_frames_dropped_total{reason=%q}: %v, want 0", reason, m)
		}
	}
	if m := metrictest.Series(mfs, "edged_rtsp_packets_lost_total", "source", "door"); m == nil || m.GetCounter().GetValue() != 0 {
		t.Errorf("edged_rtsp_packets_lost_total: %v, want 0", m)
	}
	frames := 0.0
	for _, clock := range []string{"sender_report", "arrival"} {
		m := metrictest.Series(mfs, "edged_rtsp_frames_total", "source", "door", "clock", clock)
		if m == nil {
			t.Errorf("no edged_rtsp_frames_total{clock=%q}", clock)
		}
		frames += m.GetCounter().GetValue()
	}
	if frames < float64(st0.Frames) || frames > float64(st.Frames) || st0.Frames < 5 {
		t.Errorf("edged_rtsp_frames_total sums to %v, Stats says %d frames before the scrape and %d after (at least 5 delivered)", frames, st0.Frames, st.Frames)
	}
	if m := metrictest.Series(mfs, "edged_rtsp_transport", "source", "door", "transport", "tcp"); m.GetGauge().GetValue() != 1 {
		t.Errorf("edged_rtsp_transport{transport=tcp}: %v, want 1", m)
	}
	if note := s.StatusNote(); note != "rtsp over tcp" {
		t.Errorf("StatusNote %q, want %q", note, "rtsp over tcp")
	}
}
