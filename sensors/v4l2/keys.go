package v4l2

import (
	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/sensors/internal/camkeys"
)

// SourceKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go).
var SourceKind = confkeys.Kind{Name: Kind, Camera: true, New: func() confkeys.Keys { return new(Keys) }}

// Keys are a V4L2 camera's keys in [[source]] (configs/edged.toml
// documents them).
type Keys struct {
	Device string `toml:"device"`
	camkeys.Frames
	IO string `toml:"io"` // auto | userptr | mmap

	// Keys of other kinds it refuses or bounds.
	FreeRun bool `confkeys:"other" toml:"free_run"`
	Period  int  `confkeys:"other" toml:"period"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	k.Frames.Defaults("YUYV")
	confkeys.Default(&k.IO, MemoryAuto)
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	if k.Device == "" {
		p.Add("device", "missing: a V4L2 source needs device = \"/dev/videoN\" or a stable /dev/v4l/by-id/... path")
	}
	k.Frames.Check(p, Kind, false, "the device's default rate")
	if k.FreeRun {
		p.Add("free_run", "is for replay sources (a %s source: fps = 0 is the device's default rate)", Kind)
	}
	confkeys.OneOf(p, "io", k.IO, MemoryAuto, MemoryUserptr, MemoryMmap)
	if k.Period < 0 {
		p.Add("period", "must not be negative")
	}
}
