package rtsp

import (
	"bytes"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// The network camera's series, read from Stats when the daemon's metrics
// are scraped (a source that is a prometheus.Collector is collected with
// the daemon's series). docs/OPERATIONS.md lists them; the names and
// labels are edged's contract.
var (
	descDropped = prometheus.NewDesc("edged_rtsp_frames_dropped_total",
		"Network camera pictures dropped before decoding or delivery, by reason (loss: RTP packets lost, until the next key picture).",
		[]string{"source", "reason"}, nil)
	descLost = prometheus.NewDesc("edged_rtsp_packets_lost_total",
		"RTP packets of a network camera missing by sequence number.", []string{"source"}, nil)
	descFrames = prometheus.NewDesc("edged_rtsp_frames_total",
		"Network camera frames delivered, by where their capture time comes from (sender_report, arrival).", []string{"source", "clock"}, nil)
	descTransport = prometheus.NewDesc("edged_rtsp_transport",
		"1 for the transport of a network camera's current or last session (tcp, udp).", []string{"source", "transport"}, nil)
)

// Collector is the camera's collector (runtime collects a source that
// has one with the daemon's series, as it does a sink's).
func (s *Source) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Source }

// Collect implements prometheus.Collector: pictures dropped by reason,
// packets lost, frames by clock and the session's transport, labelled with
// the camera's name.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	st, name := c.s.Stats(), c.s.Name()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, r := range h26x.DropReasons() {
		counter(descDropped, st.Depacketizer.Dropped[r-1], name, r.String())
	}
	counter(descDropped, st.DecoderDropped, name, "decoder")
	counter(descLost, st.Depacketizer.Lost, name)
	counter(descFrames, st.ClockSenderReport, name, sensors.ClockSenderReport.String())
	counter(descFrames, st.ClockArrival, name, sensors.ClockArrival.String())
	if st.Transport != "" {
		ch <- prometheus.MustNewConstMetric(descTransport, prometheus.GaugeValue, 1, name, st.Transport)
	}
}

// Describe implements prometheus.Collector: unchecked, as the daemon's
// collector (the series follow the running configuration).
func (collector) Describe(chan<- *prometheus.Desc) {}

// StatusNote is what STATUS= says of the camera (runtime looks for it):
// its transport, and the pictures dropped after losses so far.
func (s *Source) StatusNote() string {
	st := s.Stats()
	var b bytes.Buffer
	if st.Transport != "" {
		fmt.Fprintf(&b, "rtsp over %s", st.Transport)
	}
	if n := st.Depacketizer.DroppedTotal() + st.DecoderDropped; n > 0 {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d pictures dropped until a key picture (%d RTP packets lost)", n, st.Depacketizer.Lost)
	}
	return b.String()
}
