package replay

import (
	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/sensors/internal/camkeys"
)

// SourceKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go).
var SourceKind = confkeys.Kind{Name: Kind, Camera: true, New: func() confkeys.Keys { return new(Keys) }}

// Keys are a replay camera's keys in [[source]] (configs/edged.toml
// documents them). Its size and format may come from the recording.
type Keys struct {
	camkeys.Frames
	Path    string `toml:"path"`
	Loop    bool   `toml:"loop"`
	FreeRun bool   `toml:"free_run"` // every frame at once: no recorded pace, no fps

	// A key of another kind it bounds.
	Period int `confkeys:"other" toml:"period"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() { k.Frames.Defaults("") }

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	if k.Path == "" {
		p.Add("path", "missing: a replay source needs path = a recording file or an image folder")
	}
	k.Frames.Check(p, Kind, true, "the recorded pace; free_run = true plays every frame at once")
	if k.Period < 0 {
		p.Add("period", "must not be negative")
	}
}
