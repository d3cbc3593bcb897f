package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/tensorrt"
	"github.com/edged-dev/edged/umem"
)

// trtBackend is a TensorRT backend with the GPU worker its calls run on and
// a goroutine that moves TensorRT's log records into the daemon's log.
type trtBackend struct {
	*tensorrt.Backend
	worker *umem.Worker
	log    *slog.Logger

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// newTensorRT opens libnvinfer for one model. In builds without the
// tensorrt tag tensorrt.New explains that (and names the libnvinfer this
// machine has).
func newTensorRT(log *slog.Logger, place *umem.Placement, m *config.Model, c *config.Config) (trt.Backend, error) {
	worker, err := place.Device.NewWorker()
	if err != nil {
		return nil, err
	}
	level := tensorrt.SeverityWarning
	if c.Daemon.LogLevel == "debug" {
		level = tensorrt.SeverityInfo
	}
	o := tensorrt.Options{
		Library:           c.GPU.TensorRTLibrary,
		VersionCompatible: m.VersionCompatible,
		GPU:               tensorrt.UmemGPU(place.Device, worker),
		LogLevel:          level,
		StandardPlugins:   c.GPU.TensorRTPlugins,
		UseDLA:            m.DLA() >= 0,
		DLACore:           m.DLA(),
		MaxPluginBytes:    c.Daemon.MaxModelBytes,
	}
	if p := o.StandardPlugins; p != config.PluginsAuto && p != config.PluginsOff {
		o.StandardPlugins = c.Resolve(p)
	}
	for _, p := range m.Plugins {
		o.Plugins = append(o.Plugins, c.Resolve(p))
	}
	b, err := tensorrt.New(o)
	if err != nil {
		worker.Close()
		if errors.Is(err, tensorrt.ErrDLA) || errors.Is(err, tensorrt.ErrPlugin) {
			// The configuration names a DLA core this module does not
			// have, or a plugin library that does not load: waiting does
			// not help.
			err = fmt.Errorf("%w: model %q: %w", config.ErrInvalid, m.Name, err)
		}
		return nil, err
	}
	log.Info("TensorRT backend", "library", b.Library().String(), "built_against", tensorrt.HeaderVersion().String(),
		"plugins", b.Plugins(), "dla_core", m.DLA(), "dla_cores", b.DLACores())
	t := &trtBackend{Backend: b, worker: worker, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go t.drainLogs()
	return t, nil
}

func (t *trtBackend) drainLogs() {
	defer close(t.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var buf []tensorrt.LogRecord
	for {
		select {
		case <-t.stop:
			t.flushLogs(buf)
			return
		case <-tick.C:
			buf = t.flushLogs(buf)
		}
	}
}

func (t *trtBackend) flushLogs(buf []tensorrt.LogRecord) []tensorrt.LogRecord {
	recs, dropped := t.DrainLog(buf[:0])
	for _, r := range recs {
		switch r.Severity {
		case tensorrt.SeverityInternalError, tensorrt.SeverityError:
			t.log.Error("TensorRT", "msg_trt", r.Message)
		case tensorrt.SeverityWarning:
			t.log.Warn("TensorRT", "msg_trt", r.Message)
		default:
			t.log.Debug("TensorRT", "msg_trt", r.Message)
		}
	}
	if dropped > 0 {
		t.log.Warn("TensorRT log records dropped", "dropped", dropped)
	}
	return recs
}

// Close closes the backend (after its engines), then its worker.
func (t *trtBackend) Close() error {
	t.closeOnce.Do(func() {
		close(t.stop)
		<-t.done
		t.closeErr = t.Backend.Close()
		if err := t.worker.Close(); err != nil && t.closeErr == nil {
			t.closeErr = err
		}
	})
	return t.closeErr
}
