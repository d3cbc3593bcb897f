package runtime

import (
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/serialsrc"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/sensors/v4l2"
)

// The source and sink kinds as the binary registers them (cmd/edged/kinds.go), for
// the configurations these tests parse.
func init() {
	config.RegisterSourceKinds(v4l2.SourceKind, synthetic.SourceKind, replay.SourceKind, rtsp.SourceKind, serialsrc.SourceKind)
	config.RegisterSinkKinds(socketsink.SinkKind, serialsink.SinkKind, mqttsink.SinkKind)
}
