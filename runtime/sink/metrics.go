package sink

import "github.com/prometheus/client_golang/prometheus"

// The series every sink kind exports; docs/OPERATIONS.md lists them and
// the names are edged's contract.
var (
	RecordsSent    = prometheus.NewDesc("edged_sink_records_sent_total", "Records written by each sink (all clients).", []string{"sink"}, nil)
	RecordsDropped = prometheus.NewDesc("edged_sink_records_dropped_total", "Records dropped by each sink (slow clients, full queues, stalled ports).", []string{"sink"}, nil)
)

// Emit sends a sink's const metrics to a collector's channel: counters,
// gauges and booleans (as 0 or 1), each with the sink's name as its first
// label value.
type Emit struct {
	Ch   chan<- prometheus.Metric
	Name string // the sink's name, the "sink" label
}

// Counter sends a counter of d.
func (e Emit) Counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.Ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{e.Name}, labels...)...)
}

// Gauge sends a gauge of d.
func (e Emit) Gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.Ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{e.Name}, labels...)...)
}

// Flag sends b as a gauge of d: 1 for true, 0 for false.
func (e Emit) Flag(d *prometheus.Desc, b bool, labels ...string) {
	v := 0.0
	if b {
		v = 1
	}
	e.Gauge(d, v, labels...)
}
