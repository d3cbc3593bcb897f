package v4l2

import "github.com/prometheus/client_golang/prometheus"

// The camera's series, read from Stats when the daemon's metrics are
// scraped (a source that is a prometheus.Collector is collected with the
// daemon's series). docs/OPERATIONS.md lists them; the names and labels
// are edged's contract.
var (
	descCaptureMode = prometheus.NewDesc("edged_camera_capture_mode",
		"1 for the V4L2 memory mode in use (userptr: zero-copy; mmap: one copy).", []string{"source", "mode"}, nil)
	descCameraEvents = prometheus.NewDesc("edged_camera_events_total",
		"V4L2 driver events: dropped frames by reason, poll timeouts, stream restarts, unplugs.", []string{"source", "event"}, nil)
)

// Collector is the camera's collector (runtime collects a source that
// has one with the daemon's series, as it does a sink's).
func (s *Source) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Source }

// Collect implements prometheus.Collector: the memory mode in use (once a
// Start chose it) and the driver's events, labelled with the camera's
// name.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	st, name := c.s.Stats(), c.s.Name()
	if st.Mode != "" {
		ch <- prometheus.MustNewConstMetric(descCaptureMode, prometheus.GaugeValue, 1, name, st.Mode)
	}
	for _, e := range []struct {
		event string
		n     uint64
	}{{"corrupt", st.Corrupt}, {"short", st.Short}, {"decode", st.Decode},
		{"timeouts", st.Timeouts}, {"restarts", st.Restarts}, {"gone", st.Gone}} {
		ch <- prometheus.MustNewConstMetric(descCameraEvents, prometheus.CounterValue, float64(e.n), name, e.event)
	}
}

// Describe implements prometheus.Collector: unchecked, as the daemon's
// collector (the series follow the running configuration).
func (collector) Describe(chan<- *prometheus.Desc) {}
