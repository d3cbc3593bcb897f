package main

import (
	"context"
	"log/slog"
	"net"

	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/serialsrc"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/sensors/v4l2"
)

// sinkKind is what the binary does with a sink of one kind: build is how
// run makes it (from its table, the listener systemd passed for it, and
// the daemon's handler of control requests), check how edged check probes
// what it writes to, as run would, undoing it.
type sinkKind struct {
	build func(log *slog.Logger, s *config.Sink, c *config.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error)
	check func(ctx context.Context, r *report, c *config.Config, s *config.Sink)
}

// sinkKinds are the sink kinds this binary has, by the kind names their
// packages declare: the one place that names them. The daemon sees a sink
// as an edruntime.Sink and its collector only.
var sinkKinds = map[string]sinkKind{
	socketsink.Kind: {build: newSocketSink, check: checkSocketSink},
	serialsink.Kind: {build: newSerialSink, check: checkSerialSink},
	mqttsink.Kind:   {build: newMQTTSink, check: checkMQTTSink},
}

// sourceKind is what the binary does with a source of one kind: a camera
// is built by camera (from its table, the pixel format it names and how
// MJPEG is decoded), a serial sensor by newSensor; check is what edged
// check says about the device, recording or stream it reads (nil: nothing
// to look at), as run would open it.
type sourceKind struct {
	camera func(sc *config.Source, c *config.Config, pf sensors.PixelFormat, jo jpeg.Options) (sensors.Source, error)
	check  func(ctx context.Context, sc *config.Source, c *config.Config) (what string, err error)
}

// sourceKinds are the source kinds this binary has, by the kind names
// their packages declare: the one place that names them.
var sourceKinds = map[string]sourceKind{
	synthetic.Kind: {camera: newSynthetic},
	v4l2.Kind:      {camera: newV4L2, check: checkV4L2},
	replay.Kind:    {camera: newReplay, check: checkReplay},
	rtsp.Kind: {camera: func(sc *config.Source, c *config.Config, _ sensors.PixelFormat, _ jpeg.Options) (sensors.Source, error) {
		return newRTSPCamera(sc, c)
	}, check: checkRTSP},
	serialsrc.Kind: {check: checkSerialSensor},
}

// The source and sink kinds' keys, as their packages declare them, for the
// configuration (in the order its messages list the kinds).
func init() {
	config.RegisterSourceKinds(v4l2.SourceKind, synthetic.SourceKind, replay.SourceKind, rtsp.SourceKind, serialsrc.SourceKind)
	config.RegisterSinkKinds(socketsink.SinkKind, serialsink.SinkKind, mqttsink.SinkKind)
}
