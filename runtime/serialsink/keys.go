package serialsink

import "github.com/edged-dev/edged/internal/confkeys"

// SinkKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go): it holds its serial device.
var SinkKind = confkeys.SinkKind{
	Name: Kind,
	New:  func() confkeys.Keys { return new(Keys) },
	Holds: func(_ string, k confkeys.Keys, resolve func(string) string) string {
		return Kind + " " + resolve(k.(*Keys).Device)
	},
}

// Keys are a serial sink's keys in [[sink]] (configs/edged.toml documents
// them).
type Keys struct {
	Format        string `toml:"format"` // cobs-cbor | ndjson
	Device        string `toml:"device"`
	Baud          int    `toml:"baud"`
	DataBits      int    `toml:"data_bits"`
	Parity        string `toml:"parity"`
	StopBits      int    `toml:"stop_bits"`
	Queue         int    `toml:"queue"` // records held in memory
	MaxFrameBytes int    `toml:"max_frame_bytes"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	confkeys.Default(&k.Format, "cobs-cbor")
	if k.Baud == 0 {
		k.Baud = DefaultBaud
	}
	if k.DataBits == 0 {
		k.DataBits = 8
	}
	confkeys.Default(&k.Parity, "none")
	if k.StopBits == 0 {
		k.StopBits = 1
	}
	if k.Queue == 0 {
		k.Queue = DefaultQueue
	}
	if k.MaxFrameBytes == 0 {
		k.MaxFrameBytes = DefaultMaxFrameBytes
	}
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	if k.Device == "" {
		p.Add("device", "missing: a serial sink needs device = \"/dev/ttyTHS0\" or a stable /dev/serial/by-id/... path")
	}
	confkeys.OneOf(p, "format", k.Format, "cobs-cbor", "ndjson")
	if k.Baud <= 0 {
		p.Add("baud", "must be positive")
	}
	if k.DataBits < 5 || k.DataBits > 8 {
		p.Add("data_bits", "must be between 5 and 8")
	}
	confkeys.OneOf(p, "parity", k.Parity, "none", "odd", "even", "mark", "space")
	if k.StopBits != 1 && k.StopBits != 2 {
		p.Add("stop_bits", "must be 1 or 2")
	}
	if k.Queue < 1 || k.Queue > 65536 {
		p.Add("queue", "must be between 1 and 65536")
	}
	if k.MaxFrameBytes < 64 || k.MaxFrameBytes > 1<<20 {
		p.Add("max_frame_bytes", "must be between 64 and 1048576")
	}
}
