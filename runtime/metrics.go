package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// serveMetrics serves Prometheus text on /metrics, and /livez and /readyz,
// on daemon.metrics_listen ("host:port" or "unix:/path") until ctx is done.
func (d *daemon) serveMetrics(ctx context.Context, addr string) (func(), error) {
	network, address := "tcp", addr
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, address = "unix", p
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("metrics socket %s: %w", p, err)
		}
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		d.writeMetrics(w)
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		if !d.checkHealthQuiet() {
			http.Error(w, "stalled\n", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		ready := d.ready && len(d.graph.failed) == 0
		d.mu.Unlock()
		if !ready {
			http.Error(w, "not ready\n", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics server failed", "err", err)
		}
	}()
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
	}, nil
}

// checkHealthQuiet reports whether every loop progressed within the stall
// budget, without logging.
func (d *daemon) checkHealthQuiet() bool {
	g := d.currentGraph()
	if len(g.failed) > 0 {
		return false
	}
	limit, now := int64(g.cfg.Daemon.StallTimeout.Duration), monoNow()
	for _, p := range g.pipelines {
		if now-p.captureStamp.Load() > limit || now-p.inferStamp.Load() > limit {
			return false
		}
	}
	return true
}

// metricWriter writes the Prometheus text format, one family at a time.
type metricWriter struct {
	w    io.Writer
	seen map[string]bool
}

func (m *metricWriter) family(name, typ, help string) {
	if m.seen[name] {
		return
	}
	m.seen[name] = true
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (m *metricWriter) sample(name string, labels []string, v float64) {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", labels[i], labels[i+1])
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(m.w, "%s %g\n", b.String(), v)
}

func (m *metricWriter) counter(name, help string, v float64, labels ...string) {
	m.family(name, "counter", help)
	m.sample(name, labels, v)
}

func (m *metricWriter) gauge(name, help string, v float64, labels ...string) {
	m.family(name, "gauge", help)
	m.sample(name, labels, v)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (d *daemon) writeMetrics(w io.Writer) {
	m := &metricWriter{w: w, seen: map[string]bool{}}
	d.mu.Lock()
	g, ready := d.graph, d.ready
	sinks := make([]*sinkEntry, 0, len(d.sinks))
	for _, e := range d.sinks {
		sinks = append(sinks, e)
	}
	d.mu.Unlock()
	sort.Slice(sinks, func(i, j int) bool { return sinks[i].cfg.Name < sinks[j].cfg.Name })

	m.gauge("edged_build_info", "Build information.", 1, "version", Version, "go", goruntime.Version(), "arch", goruntime.GOARCH)
	m.gauge("edged_ready", "1 once every pipeline produced a result or waits for its source.", b2f(ready))
	m.gauge("edged_goroutines", "Goroutines in the daemon (a steady count means none leak).", float64(goruntime.NumGoroutine()))
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		// Less the descriptor ReadDir itself holds open.
		m.gauge("edged_open_fds", "Open file descriptors (/proc/self/fd).", float64(len(fds)-1))
	}
	if mi, err := umem.ReadMeminfo(""); err == nil {
		m.gauge("edged_system_memory_available_bytes", "MemAvailable from /proc/meminfo (on Jetson also the GPU's memory).", float64(mi.MemAvailable))
	}
	if g != nil {
		if lg := g.lastGood; lg != nil {
			m.counter("edged_state_writes_total", "Last-good model copies written to the state folder, by result (error: disk full, read-only; serving goes on).", float64(lg.writes.Load()), "result", "ok")
			m.counter("edged_state_writes_total", "", float64(lg.writeErrors.Load()), "result", "error")
		}
		now := monoNow()
		for _, p := range g.pipelines {
			pl := []string{"pipeline", p.cfg.Name}
			s := &p.stats
			m.counter("edged_frames_captured_total", "Frames delivered by the source.", float64(s.captured.Load()), "pipeline", p.cfg.Name, "source", p.scfg.Name)
			m.counter("edged_frames_dropped_total", "Frames dropped before inference, by reason.", float64(s.droppedStale.Load()), "pipeline", p.cfg.Name, "reason", "stale")
			m.counter("edged_frames_dropped_total", "", float64(s.droppedCorrupt.Load()), "pipeline", p.cfg.Name, "reason", "corrupt")
			m.counter("edged_results_total", "Results published.", float64(s.results.Load()), pl...)
			m.counter("edged_inference_errors_total", "Failed inferences.", float64(s.inferErrors.Load()), pl...)
			m.counter("edged_preprocess_errors_total", "Frames that failed preprocessing.", float64(s.preErrors.Load()), pl...)
			m.gauge("edged_source_up", "1 while the pipeline's source delivers frames.", b2f(p.sourceUp.Load()), "source", p.scfg.Name)
			m.counter("edged_source_starts_total", "Successful source starts (1 + reconnects).", float64(s.reconnects.Load()), "source", p.scfg.Name)
			for _, q := range []float64{0.5, 0.9, 0.99} {
				m.gauge("edged_latency_seconds", "Capture to result latency quantiles (bucket upper bounds).", s.latencyTotal.quantile(q)/1e9, "pipeline", p.cfg.Name, "quantile", fmt.Sprint(q))
				m.gauge("edged_inference_seconds", "Inference time quantiles (bucket upper bounds).", s.latencyInfer.quantile(q)/1e9, "pipeline", p.cfg.Name, "quantile", fmt.Sprint(q))
			}
			m.gauge("edged_pipeline_progress_age_seconds", "Time since the loop last made progress (the watchdog compares it with stall_timeout).",
				float64(now-p.inferStamp.Load())/1e9, "pipeline", p.cfg.Name, "loop", "inference")
			m.gauge("edged_pipeline_progress_age_seconds", "", float64(now-p.captureStamp.Load())/1e9, "pipeline", p.cfg.Name, "loop", "capture")
			if cs, ok := p.src.(interface {
				CaptureStats() (string, map[string]uint64)
			}); ok {
				mode, counters := cs.CaptureStats()
				if mode != "" {
					m.gauge("edged_camera_capture_mode", "1 for the V4L2 memory mode in use (userptr: zero-copy; mmap: one copy).", 1, "source", p.scfg.Name, "mode", mode)
				}
				keys := make([]string, 0, len(counters))
				for k := range counters {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					m.counter("edged_camera_events_total", "V4L2 driver events: dropped frames by reason, poll timeouts, stream restarts, unplugs.", float64(counters[k]), "source", p.scfg.Name, "event", k)
				}
			}
			if gen := p.hot.Current(); gen != nil {
				m.gauge("edged_engine_info", "The engine generation serving each pipeline.", 1, "pipeline", p.cfg.Name, "model", gen.Model,
					"generation", fmt.Sprint(gen.Number), "sha256", gen.SHAPrefix(), "backend", gen.Engine.Backend())
			}
			if p.pool != nil {
				st := p.pool.Stats()
				for i, n := range st.State {
					m.gauge("edged_pool_slots", "Frame pool slots by state.", float64(n), "pipeline", p.cfg.Name, "state", umem.SlotState(i).String())
				}
			}
		}
		for name, md := range g.models {
			r, ok := md.watch.(*trt.Reloader)
			if !ok {
				continue
			}
			st := r.Stats()
			m.counter("edged_engine_reloads_total", "Hot-reload outcomes.", float64(st.Reloaded), "model", name, "result", "ok")
			reasons := make([]string, 0, len(st.RejectedBy))
			for k := range st.RejectedBy {
				reasons = append(reasons, k)
			}
			sort.Strings(reasons)
			for _, k := range reasons {
				m.counter("edged_engine_reloads_total", "", float64(st.RejectedBy[k]), "model", name, "result", k)
			}
			m.counter("edged_engine_checks_total", "Model file checks after debouncing.", float64(st.Checks), "model", name)
			m.gauge("edged_engine_watch_polling", "1 while file events are unavailable and the model file is polled.", b2f(st.Polling), "model", name)
		}
		for name, e := range g.sensors {
			m.gauge("edged_source_up", "", b2f(e.up.Load()), "source", name)
			m.gauge("edged_sensor_samples", "Samples kept for matching.", float64(e.ring.Len()), "source", name)
			if rs, ok := e.src.(interface{ RejectedLines() map[string]uint64 }); ok {
				counts := rs.RejectedLines()
				reasons := make([]string, 0, len(counts))
				for k := range counts {
					reasons = append(reasons, k)
				}
				sort.Strings(reasons)
				for _, k := range reasons {
					m.counter("edged_sensor_lines_rejected_total", "Serial sensor lines or packets refused, by reason (checksum, malformed, oversize).", float64(counts[k]), "source", name, "reason", k)
				}
			}
		}
	}
	for _, e := range sinks {
		sl := []string{"sink", e.cfg.Name}
		switch s := e.sink.(type) {
		case interface{ Stats() stream.SocketStats }:
			st := s.Stats()
			m.gauge("edged_stream_clients", "Connected socket clients.", float64(st.Clients), sl...)
			m.counter("edged_sink_records_sent_total", "Records written by each sink (all clients).", float64(st.Sent), sl...)
			m.counter("edged_sink_records_dropped_total", "Records dropped by each sink (slow clients, full queues).", float64(st.Dropped), sl...)
			m.counter("edged_stream_disconnects_total", "Socket clients that went away.", float64(st.Disconnects), "sink", e.cfg.Name, "reason", "any")
			m.counter("edged_stream_disconnects_total", "", float64(st.SlowDisconnects), "sink", e.cfg.Name, "reason", "slow")
			m.counter("edged_stream_rejected_total", "Connections refused, by reason (any; max_clients: the sink was full).", float64(st.Rejected), "sink", e.cfg.Name, "reason", "any")
			m.counter("edged_stream_rejected_total", "", float64(st.RejectedFull), "sink", e.cfg.Name, "reason", "max_clients")
		case interface{ Stats() stream.SerialStats }:
			st := s.Stats()
			m.gauge("edged_serial_up", "1 while the serial port is open.", b2f(st.Up), sl...)
			m.counter("edged_sink_records_sent_total", "", float64(st.Sent), sl...)
			m.counter("edged_sink_records_dropped_total", "", float64(st.Dropped), sl...)
			m.counter("edged_serial_reconnects_total", "Serial port reopens.", float64(st.Reconnects), sl...)
			m.counter("edged_serial_write_stalls_total", "Writes that stalled past the deadline.", float64(st.Stalls), sl...)
		case interface{ Stats() mqttsink.Stats }:
			st := s.Stats()
			m.gauge("edged_sink_connected", "1 while the MQTT sink is connected to its broker.", b2f(st.Connected), sl...)
			m.counter("edged_sink_records_sent_total", "", float64(st.Sent), sl...)
			m.counter("edged_sink_records_dropped_total", "", float64(st.Dropped), sl...)
			m.counter("edged_sink_dropped_total", "MQTT records dropped, by reason (queue_full: the memory ring or the disk queue's bound; refused: by the broker).", float64(st.DroppedQueueFull), "sink", e.cfg.Name, "reason", "queue_full")
			m.counter("edged_sink_dropped_total", "", float64(st.DroppedRefused), "sink", e.cfg.Name, "reason", "refused")
			for _, r := range []struct {
				reason string
				n      uint64
			}{{"auth", st.ErrAuth}, {"tls", st.ErrTLS}, {"connect", st.ErrConnect}, {"publish", st.ErrPublish}, {"disk", st.ErrDisk}} {
				m.counter("edged_sink_errors_total", "MQTT sink errors, by reason (auth, tls, connect, publish, disk).", float64(r.n), "sink", e.cfg.Name, "reason", r.reason)
			}
			m.gauge("edged_sink_queue_records", "Records the MQTT sink holds that the broker has not acknowledged.", float64(st.Queued), sl...)
			m.gauge("edged_sink_queue_bytes", "Bytes of the MQTT sink's queue (on disk, or in memory while degraded).", float64(st.QueueBytes), sl...)
			m.gauge("edged_sink_queue_degraded", "1 while the MQTT sink's disk queue cannot be written (records kept in memory only).", b2f(st.Degraded), sl...)
		}
	}
}
