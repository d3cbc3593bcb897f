package serialsink

import (
	"testing"

	"github.com/edged-dev/edged/runtime/sink/sinktest"
)

// TestCollector: the sink's collector registers on a pedantic registry
// (its descriptions match what it sends) and exports the serial sink's
// series under the sink's name: the port is up once opened.
func TestCollector(t *testing.T) {
	_, path := newPty(t)
	s, ev := newSerialSink(t, Options{Name: "uart", Device: path, Baud: 115200})
	waitSerialEvent(t, ev, Opened)
	sinktest.Want(t, sinktest.Series(t, s.Collector(), "uart"), map[string]float64{
		"edged_serial_up": 1, "edged_sink_records_sent_total": 0, "edged_sink_records_dropped_total": 0,
		"edged_serial_reconnects_total": 0, "edged_serial_write_stalls_total": 0,
	})
}
