package socketsink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edged-dev/edged/runtime/sink"
)

// The socket sink's own series (docs/OPERATIONS.md); the names are
// edged's contract.
var (
	descClients     = prometheus.NewDesc("edged_stream_clients", "Connected socket clients.", []string{"sink"}, nil)
	descDisconnects = prometheus.NewDesc("edged_stream_disconnects_total", "Socket clients that went away, by reason (any; slow: cut off by the write deadline; unread, of those: it left what it was sent unread).", []string{"sink", "reason"}, nil)
	descRejected    = prometheus.NewDesc("edged_stream_rejected_total", "Connections refused, by reason (any; max_clients: the sink was full; max_clients_per_uid: the peer's user had its most).", []string{"sink", "reason"}, nil)
)

// Collector returns the sink's Prometheus collector: it reads the sink's
// counters (Stats) when scraped, labelled with the sink's name.
func (s *Sink) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Sink }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClients, sink.RecordsSent, sink.RecordsDropped, descDisconnects, descRejected} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st, e := c.s.Stats(), sink.Emit{Ch: ch, Name: c.s.opts.Name}
	e.Gauge(descClients, float64(st.Clients))
	e.Counter(sink.RecordsSent, st.Sent)
	e.Counter(sink.RecordsDropped, st.Dropped)
	e.Counter(descDisconnects, st.Disconnects, "any")
	e.Counter(descDisconnects, st.SlowDisconnects, "slow")
	e.Counter(descDisconnects, st.Unread, "unread")
	e.Counter(descRejected, st.Rejected, "any")
	e.Counter(descRejected, st.RejectedFull, "max_clients")
	e.Counter(descRejected, st.RejectedPerUID, "max_clients_per_uid")
}
