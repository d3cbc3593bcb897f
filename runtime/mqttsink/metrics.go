package mqttsink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edged-dev/edged/runtime/sink"
)

// The MQTT sink's own series (docs/OPERATIONS.md); the names are edged's
// contract.
var (
	descConnected     = prometheus.NewDesc("edged_sink_connected", "1 while the MQTT sink is connected to its broker.", []string{"sink"}, nil)
	descDropped       = prometheus.NewDesc("edged_sink_dropped_total", "MQTT records dropped, by reason (queue_full: the memory ring or the disk queue's bound; refused: by the broker).", []string{"sink", "reason"}, nil)
	descErrors        = prometheus.NewDesc("edged_sink_errors_total", "MQTT sink errors, by reason (auth, tls, connect, publish, disk).", []string{"sink", "reason"}, nil)
	descQueueRecords  = prometheus.NewDesc("edged_sink_queue_records", "Records the MQTT sink holds that the broker has not acknowledged.", []string{"sink"}, nil)
	descQueueBytes    = prometheus.NewDesc("edged_sink_queue_bytes", "Bytes of the MQTT sink's queue (on disk, or in memory while degraded).", []string{"sink"}, nil)
	descQueueDegraded = prometheus.NewDesc("edged_sink_queue_degraded", "1 while the MQTT sink's disk queue cannot be written (records kept in memory only).", []string{"sink"}, nil)
)

// Collector returns the sink's Prometheus collector: it reads the sink's
// counters (Stats) when scraped, labelled with the sink's name.
func (s *Sink) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Sink }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnected, sink.RecordsSent, sink.RecordsDropped, descDropped, descErrors, descQueueRecords, descQueueBytes, descQueueDegraded} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st, e := c.s.Stats(), sink.Emit{Ch: ch, Name: c.s.o.Name}
	e.Flag(descConnected, st.Connected)
	e.Counter(sink.RecordsSent, st.Sent)
	e.Counter(sink.RecordsDropped, st.Dropped)
	e.Counter(descDropped, st.DroppedQueueFull, "queue_full")
	e.Counter(descDropped, st.DroppedRefused, "refused")
	e.Counter(descDropped, st.DroppedDamaged, "damaged")
	e.Counter(descErrors, st.ErrAuth, "auth")
	e.Counter(descErrors, st.ErrTLS, "tls")
	e.Counter(descErrors, st.ErrConnect, "connect")
	e.Counter(descErrors, st.ErrPublish, "publish")
	e.Counter(descErrors, st.ErrDisk, "disk")
	e.Gauge(descQueueRecords, float64(st.Queued))
	e.Gauge(descQueueBytes, float64(st.QueueBytes))
	e.Flag(descQueueDegraded, st.Degraded)
}
