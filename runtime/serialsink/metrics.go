package serialsink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edged-dev/edged/runtime/sink"
)

// The serial sink's own series (docs/OPERATIONS.md); the names are
// edged's contract.
var (
	descUp      = prometheus.NewDesc("edged_serial_up", "1 while the serial port is open.", []string{"sink"}, nil)
	descReopens = prometheus.NewDesc("edged_serial_reconnects_total", "Serial port reopens.", []string{"sink"}, nil)
	descStalls  = prometheus.NewDesc("edged_serial_write_stalls_total", "Writes that stalled past the deadline.", []string{"sink"}, nil)
)

// Collector returns the sink's Prometheus collector: it reads the sink's
// counters (Stats) when scraped, labelled with the sink's name.
func (s *Sink) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Sink }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, sink.RecordsSent, sink.RecordsDropped, descReopens, descStalls} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st, e := c.s.Stats(), sink.Emit{Ch: ch, Name: c.s.opts.Name}
	e.Flag(descUp, st.Up)
	e.Counter(sink.RecordsSent, st.Sent)
	e.Counter(sink.RecordsDropped, st.Dropped)
	e.Counter(descReopens, st.Reconnects)
	e.Counter(descStalls, st.Stalls)
}
