package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/onnx"
	"github.com/edged-dev/edged/umem"
)

// factories wires the concrete sources, engines, memory and sinks that the
// configuration names.
func factories(log *slog.Logger) edruntime.Factories {
	return edruntime.Factories{
		Allocator: func(g edruntime.GPUConfig) (umem.Allocator, string, error) {
			p, err := umem.Open(umem.Options{Device: g.Device, Strategy: umem.Strategy(g.Memory), Strict: g.Strict})
			if err != nil {
				return nil, "", err
			}
			return p.Alloc, p.Reason, nil
		},
		Camera:  newCamera,
		Sensor:  newSensor,
		Backend: newBackend,
		Sink: func(s *edruntime.SinkConfig, c *edruntime.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error) {
			return newSink(log, s, c, inherited, control)
		},
	}
}

func newCamera(sc *edruntime.SourceConfig, c *edruntime.Config) (sensors.Source, error) {
	pf, err := sensors.ParsePixelFormat(sc.Format)
	if err != nil && sc.Format != "" {
		return nil, err
	}
	switch sc.Kind {
	case "synthetic":
		return synthetic.New(synthetic.Options{Name: sc.Name, Width: sc.Width, Height: sc.Height, Pixel: pf, FPS: sc.FPS,
			Seed: uint64(sc.Seed), PeriodFrames: sc.Period})
	}
	return nil, fmt.Errorf("source kind %q is not available in this build", sc.Kind)
}

func newSensor(sc *edruntime.SourceConfig, c *edruntime.Config) (sensors.SampleSource, error) {
	return nil, fmt.Errorf("source kind %q is not available in this build", sc.Kind)
}

func newBackend(name string, c *edruntime.Config) (trt.Backend, error) {
	switch name {
	case "onnx":
		return onnx.New(onnx.Options{Library: c.Resolve(c.Daemon.OnnxRuntimeLib)})
	}
	return nil, fmt.Errorf("%w: backend %q is not available in this build", trt.ErrBackend, name)
}

func newSink(log *slog.Logger, s *edruntime.SinkConfig, c *edruntime.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error) {
	switch s.Kind {
	case "socket":
		enc, err := stream.ParseEncoding(s.Format)
		if err != nil {
			return nil, err
		}
		mode, err := edruntime.ParseMode(s.Mode)
		if err != nil {
			return nil, err
		}
		slog := log.With("sink", s.Name)
		sock, err := stream.NewSocket(stream.SocketOptions{
			Name: s.Name, Path: c.Resolve(s.Path), Listener: inherited, NoActivation: true,
			Mode: mode, Group: s.Group, Encoding: enc, MaxClients: s.MaxClients, QueueLen: s.ClientQueue,
			WriteTimeout: s.WriteTimeout.Duration, FlushTimeout: c.Daemon.StopTimeout.Duration / 2,
			AllowUIDs: u32s(s.AllowUIDs), AllowGIDs: u32s(s.AllowGIDs),
			OnControl: func(ctx context.Context, req stream.ControlRequest, peer stream.PeerCred) error {
				slog.Info("control request", "request", req.Reload, "peer_uid", peer.UID, "peer_pid", peer.PID)
				return control(ctx, req.Reload)
			},
			OnClient: func(ev stream.ClientEvent) {
				args := []any{"client", ev.ID, "uid", ev.Peer.UID, "gid", ev.Peer.GID, "pid", ev.Peer.PID}
				switch ev.Kind {
				case stream.ClientConnected:
					slog.Info("client connected", args...)
				case stream.ClientRejected:
					slog.Warn("client rejected", append(args, "err", ev.Err)...)
				case stream.ClientDisconnected:
					args = append(args, "sent", ev.Sent, "dropped", ev.Dropped)
					if ev.Err != nil {
						slog.Warn("client disconnected", append(args, "err", ev.Err)...)
					} else {
						slog.Info("client disconnected", args...)
					}
				}
			},
		})
		if err != nil {
			return nil, err
		}
		if inherited != nil {
			slog.Info("socket sink listening (socket activation)", "path", sock.Path())
		} else {
			slog.Info("socket sink listening", "path", sock.Path(), "mode", fmt.Sprintf("%04o", mode), "group", s.Group)
		}
		return sock, nil
	case "serial":
		slog := log.With("sink", s.Name, "device", s.Device)
		var errs rateLimited
		ser, err := stream.NewSerial(stream.SerialOptions{
			Name: s.Name, Device: c.Resolve(s.Device), Baud: s.Baud, DataBits: s.DataBits, Parity: s.Parity, StopBits: s.StopBits,
			Format: s.Format, QueueLen: s.Queue, MaxFrameBytes: s.MaxFrameBytes, FlushTimeout: c.Daemon.StopTimeout.Duration / 2,
			OnEvent: func(ev stream.SerialEvent) {
				switch ev.Kind {
				case stream.SerialOpened:
					slog.Info("serial port open", "event", "serial_up")
				case stream.SerialOpenFailed:
					if errs.allow() {
						slog.Warn("serial port cannot be opened; retrying", "event", "serial_down", "retry_in", ev.Retry.String(), "err", ev.Err)
					}
				case stream.SerialLost:
					slog.Warn("serial port lost; reopening", "event", "serial_down", "retry_in", ev.Retry.String(), "err", ev.Err)
				case stream.SerialStalled:
					slog.Warn("serial writes stalled; reopening the port", "event", "serial_stalled", "retry_in", ev.Retry.String(), "err", ev.Err)
				}
			},
		})
		if err != nil {
			return nil, err
		}
		return ser, nil
	}
	return nil, errors.New("sink kind " + s.Kind + " is not available in this build")
}

// rateLimited allows one log line per 10 seconds for a repeating failure.
type rateLimited struct {
	mu   sync.Mutex
	last time.Time
}

func (r *rateLimited) allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.last) < 10*time.Second {
		return false
	}
	r.last = time.Now()
	return true
}

func u32s(v []int) []uint32 {
	out := make([]uint32, 0, len(v))
	for _, x := range v {
		out = append(out, uint32(x))
	}
	return out
}
