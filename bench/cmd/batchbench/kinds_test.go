package main

import (
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors/replay"
)

// The source kind the configurations it writes use, for config.Parse (the
// binary registers every kind, cmd/edged/kinds.go).
func init() {
	config.RegisterSourceKinds(replay.SourceKind)
	config.RegisterSinkKinds(socketsink.SinkKind)
}
