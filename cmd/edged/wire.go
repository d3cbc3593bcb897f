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

// wiring holds what the concrete parts share: the memory placement (the
// CUDA device, when there is one), opened once per daemon.
type wiring struct {
	log   *slog.Logger
	mu    sync.Mutex
	place *umem.Placement
}

// factories wires the concrete sources, engines, memory and sinks that the
// configuration names.
func factories(log *slog.Logger) edruntime.Factories {
	w := &wiring{log: log}
	return edruntime.Factories{
		Allocator: w.allocator,
		Camera:    newCamera,
		Sensor:    newSensor,
		Backend:   w.backend,
		Sink: func(s *edruntime.SinkConfig, c *edruntime.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error) {
			return newSink(log, s, c, inherited, control)
		},
	}
}

func (w *wiring) allocator(g edruntime.GPUConfig) (umem.Allocator, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.place == nil {
		p, err := umem.Open(umem.Options{Device: g.Device, Strategy: umem.Strategy(g.Memory), Strict: g.Strict})
		if err != nil {
			return nil, "", err
		}
		w.place = p
	}
	return w.place.Alloc, w.place.Reason, nil
}

func (w *wiring) backend(name string, m *edruntime.ModelConfig, c *edruntime.Config) (trt.Backend, error) {
	switch name {
	case "onnx":
		return onnx.New(onnx.Options{Library: c.Resolve(c.Daemon.OnnxRuntimeLib)})
	case "tensorrt":
		w.mu.Lock()
		place := w.place
		w.mu.Unlock()
		if place == nil || place.Device == nil {
			return nil, fmt.Errorf("%w: TensorRT needs a CUDA GPU, and this daemon runs with memory strategy %q (%s)",
				trt.ErrBackend, placeStrategy(place), placeReason(place))
		}
		return newTensorRT(w.log.With("model", m.Name), place, c.GPU.TensorRTLibrary, m.VersionCompatible, c.Daemon.LogLevel == "debug")
	}
	return nil, fmt.Errorf("%w: unknown backend %q", trt.ErrBackend, name)
}

func placeStrategy(p *umem.Placement) string {
	if p == nil {
		return "none"
	}
	return string(p.Strategy)
}

func placeReason(p *umem.Placement) string {
	if p == nil {
		return "not opened"
	}
	return p.Reason
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
