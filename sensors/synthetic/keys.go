package synthetic

import (
	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/sensors/internal/camkeys"
)

// SourceKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go).
var SourceKind = confkeys.Kind{Name: Kind, Camera: true, New: func() confkeys.Keys { return new(Keys) }}

// DefaultPeriod is a synthetic camera's frames per background colour when
// period is left out.
const DefaultPeriod = 30

// Keys are a synthetic camera's keys in [[source]] (configs/edged.toml
// documents them).
type Keys struct {
	camkeys.Frames
	Seed   int64 `toml:"seed"`
	Period int   `toml:"period"` // frames per background colour

	// A key of another kind it refuses.
	FreeRun bool `confkeys:"other" toml:"free_run"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	k.Frames.Defaults("YUYV")
	if k.Period == 0 {
		k.Period = DefaultPeriod
	}
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	k.Frames.Check(p, Kind, false, "as fast as the pipeline takes frames")
	if k.FreeRun {
		p.Add("free_run", "is for replay sources (a %s source: fps = 0 is as fast as the pipeline takes frames)", Kind)
	}
	if k.Period < 0 {
		p.Add("period", "must not be negative")
	}
}
