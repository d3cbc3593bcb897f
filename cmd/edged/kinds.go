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
