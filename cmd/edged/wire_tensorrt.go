package main

import (
	"log/slog"
	"sync"
	"time"

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
func newTensorRT(log *slog.Logger, place *umem.Placement, library string, versionCompatible, debug bool) (trt.Backend, error) {
	worker, err := place.Device.NewWorker()
	if err != nil {
		return nil, err
	}
	level := tensorrt.SeverityWarning
	if debug {
		level = tensorrt.SeverityInfo
	}
	b, err := tensorrt.New(tensorrt.Options{
		Library:           library,
		VersionCompatible: versionCompatible,
		GPU:               tensorrt.UmemGPU(place.Device, worker),
		LogLevel:          level,
	})
	if err != nil {
		worker.Close()
		return nil, err
	}
	log.Info("TensorRT backend", "library", b.Library().String(), "built_against", tensorrt.HeaderVersion().String())
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
