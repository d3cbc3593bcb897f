package runtime

import (
	"context"
	"fmt"

	"github.com/edged-dev/edged/runtime/config"
)

// A reload builds the sinks it adds or changes before it stops anything,
// wherever the new sink can exist beside the running one: a socket sink at
// a path no running sink listens on, an MQTT sink under a name no running
// one has (its queue folder and client id), a serial sink on a device no
// running one holds. A sink that cannot be built then (a socket that
// cannot be bound, a queue folder that cannot be made) rejects the reload
// with nothing stopped, so every running pipeline and sink, and every
// client, goes on as it was. A sink that takes the place of a running one
// (the same socket path, MQTT name or serial device) is built after that
// one stopped, as before; if it fails, the reload is rolled back.

// untouchedError is a commit that failed before it stopped anything: the
// running graph is as it was and nothing needs restoring.
type untouchedError struct{ error }

func (e untouchedError) Unwrap() error { return e.error }

// sinkHolds names what a sink of c holds exclusively: the listener
// systemd passed it, else what its kind says (config.Sink.Holds: a socket's
// path, a serial device, an MQTT queue folder and client id).
func (d *daemon) sinkHolds(c *config.Config, s *config.Sink) string {
	if d.inherited(c, s) != nil {
		return "socket activation"
	}
	return s.Holds(c)
}

// keptSinks is the names of the running sinks that c describes as they
// are: they stay, with their clients.
func (d *daemon) keptSinks(c *config.Config) map[string]bool {
	keep := map[string]bool{}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		if e, ok := d.sinks[s.Name]; ok && e.same(c, s) {
			keep[s.Name] = true
		}
	}
	return keep
}

// buildEarlySinks builds the sinks of c that are new or changed and can
// exist beside every running sink (see above), without stopping anything.
// On error it closes what it built.
func (d *daemon) buildEarlySinks(c *config.Config) (map[string]*sinkEntry, error) {
	keep := d.keptSinks(c)
	held := map[string]bool{}
	for _, e := range d.sinks {
		held[e.at] = true
	}
	early := map[string]*sinkEntry{}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		if keep[s.Name] || held[d.sinkHolds(c, s)] {
			continue
		}
		e, err := d.buildSink(c, s)
		if err != nil {
			closeSinks(early)
			return nil, err
		}
		early[s.Name] = e
	}
	return early, nil
}

// closeSinks closes sinks that were built and never run.
func closeSinks(m map[string]*sinkEntry) {
	for name, e := range m {
		e.cancel()
		e.sink.Close()
		delete(m, name)
	}
}

// buildSink builds sink s of c; runSink starts it.
func (d *daemon) buildSink(c *config.Config, s *config.Sink) (*sinkEntry, error) {
	sc := *s
	sink, err := d.opts.Factories.Sink(&sc, c, d.inherited(c, &sc), d.control)
	if err != nil {
		return nil, fmt.Errorf("sink %q: %w", sc.Name, err)
	}
	return &sinkEntry{cfg: sc, files: c.SinkFiles(&sc), at: d.sinkHolds(c, &sc), sink: sink, done: make(chan struct{}), cancel: func() {}}, nil
}

// runSink starts e's goroutine and puts it among the daemon's sinks.
func (d *daemon) runSink(e *sinkEntry) {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		if err := e.sink.Run(ctx); err != nil {
			d.log.Error("sink failed", "sink", e.cfg.Name, "err", err)
		}
	}()
	d.mu.Lock()
	d.sinks[e.cfg.Name] = e
	d.mu.Unlock()
	if ss, ok := e.sink.(interface {
		SetStatusFunc(func(event, reason string))
	}); ok {
		// A sink that reports its own state (MQTT: sink_up, sink_down,
		// sink_queue_degraded) does so on every sink, itself included:
		// what it said before (a queue folder unusable at start) goes out
		// now that it is one of them.
		name := e.cfg.Name
		ss.SetStatusFunc(func(event, reason string) { d.publishSinkStatus(event, name, reason) })
	}
	d.log.Info("sink started", "sink", e.cfg.Name, "kind", e.cfg.Kind)
}
