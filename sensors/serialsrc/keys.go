package serialsrc

import (
	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/sensors"
)

// SourceKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go): a sensor, whose samples a pipeline matches
// to its frames.
var SourceKind = confkeys.Kind{Name: Kind, New: func() confkeys.Keys { return new(Keys) }}

// DefaultRing is a serial sensor's samples kept for matching when ring is
// left out (its baud: DefaultBaud).
const DefaultRing = 256

// Keys are a serial sensor's keys in [[source]] (configs/edged.toml
// documents them).
type Keys struct {
	Device   string   `toml:"device"`
	Baud     int      `toml:"baud"`
	Protocol string   `toml:"protocol"` // nmea | csv | cobs
	Columns  []string `toml:"columns"`  // csv and cobs value names
	RingSize int      `toml:"ring"`     // samples kept for matching
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	if k.Baud == 0 {
		k.Baud = DefaultBaud
	}
	confkeys.Default(&k.Protocol, NMEA)
	if k.RingSize == 0 {
		k.RingSize = DefaultRing
	}
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	if k.Device == "" {
		p.Add("device", "missing: a serial source needs device = \"/dev/ttyUSB0\" or a stable /dev/serial/by-id/... path")
	}
	if k.Baud <= 0 {
		p.Add("baud", "must be positive")
	}
	confkeys.OneOf(p, "protocol", k.Protocol, NMEA, CSV, COBS)
	if (k.Protocol == CSV || k.Protocol == COBS) && len(k.Columns) == 0 {
		p.Add("columns", "missing: protocol %q needs columns = [\"ax\", \"ay\", ...] naming the values", k.Protocol)
	}
	if len(k.Columns) > sensors.MaxSampleValues {
		p.Add("columns", "at most %d columns", sensors.MaxSampleValues)
	}
	if k.RingSize < 1 || k.RingSize > 65536 {
		p.Add("ring", "must be between 1 and 65536")
	}
}
