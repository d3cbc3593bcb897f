package runtime

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A SIGHUP reload can take long: it may load and warm up engines (a model
// that ONNX Runtime constant-folds for seconds, a TensorRT engine on a
// cold Jetson), and it starts and stops sinks and devices. The run loop
// feeds the watchdog, so a reload never runs on it: the loop starts it on
// a goroutine of its own (startReload) and goes on judging the pipelines'
// progress, which is what the watchdog reports. The pipelines of the
// running configuration serve meanwhile, so the pings go on unless one of
// them stalls; a wedged pipeline stops them as before.
//
// One reload runs at a time. A request that comes meanwhile waits for the
// running one to finish (cmd/edged's SIGHUP handler blocks in Reload, and
// signals that come meanwhile are merged into one: the file is read again
// once the reload is over). STATUS= says that a reload is in progress,
// for how long and what it is doing, beside what is serving; RELOADING=1
// is sent at its start and READY=1 at its end. A stop (SIGTERM, or an
// unrecoverable failure) cancels the reload and waits for it up to the
// stop budget: a load that cannot be interrupted is then left behind, and
// frees what it built when it returns (it commits nothing once cancelled:
// commit and stop are serialised by structMu).

// reloadRun is a reload in progress, owned by the run loop.
type reloadRun struct {
	req    reloadRequest
	done   chan error
	since  time.Time
	warned time.Time
}

// reloadProgress is what STATUS= says of a reload in progress; it is
// guarded by daemon.mu.
type reloadProgress struct {
	since time.Time
	step  string
}

// slowReloadWarning is how often a reload in progress is logged.
const slowReloadWarning = 30 * time.Second

// startReload runs req on its own goroutine.
func (d *daemon) startReload(ctx context.Context, req reloadRequest) *reloadRun {
	r := &reloadRun{req: req, done: make(chan error, 1), since: time.Now()}
	r.warned = r.since
	go func() { r.done <- d.reload(ctx, req.cfg) }()
	return r
}

// awaitReload cancels the reload r (nil: none runs) and waits for it, up
// to the stop budget; the caller then stops the daemon.
func (d *daemon) awaitReload(r *reloadRun, cancel context.CancelFunc) {
	cancel()
	if r == nil {
		return
	}
	budget := d.currentGraph().cfg.Daemon.StopTimeout.Duration
	select {
	case err := <-r.done:
		r.req.done <- err
	case <-time.After(budget):
		d.log.Warn("stop asked for during a configuration reload; the reload cannot be interrupted now (a model load or warm-up in progress) and is left behind",
			"waited", budget.String(), "step", d.reloadStep())
	}
}

// warnIfSlow logs a reload that has run for long, every
// slowReloadWarning; r may be nil.
func (r *reloadRun) warnIfSlow(d *daemon) {
	if r == nil || time.Since(r.warned) < slowReloadWarning {
		return
	}
	r.warned = time.Now()
	d.log.Warn("configuration reload still in progress; the running configuration keeps serving",
		"for", time.Since(r.since).Round(time.Second).String(), "step", d.reloadStep())
}

// beginReload marks a reload in progress, for STATUS=.
func (d *daemon) beginReload() {
	d.mu.Lock()
	d.reloading = &reloadProgress{since: time.Now(), step: "preparing the new configuration"}
	d.mu.Unlock()
	d.refreshStatus()
}

// endReload marks the reload over.
func (d *daemon) endReload() {
	d.mu.Lock()
	d.reloading = nil
	d.mu.Unlock()
}

// setReloadStep says what the reload in progress does now (STATUS= is
// refreshed); outside a reload it does nothing.
func (d *daemon) setReloadStep(format string, args ...any) {
	d.mu.Lock()
	r := d.reloading
	if r != nil {
		r.step = fmt.Sprintf(format, args...)
	}
	d.mu.Unlock()
	if r != nil {
		d.refreshStatus()
	}
}

func (d *daemon) reloadStep() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reloading == nil {
		return ""
	}
	return d.reloading.step
}

// reloadStatus is the STATUS= line while a reload is in progress: for how
// long, what it is doing, and what serves meanwhile. ok is false when no
// reload runs.
func (d *daemon) reloadStatus(g *graph) (line string, ok bool) {
	d.mu.Lock()
	r := d.reloading
	var since time.Time
	var step string
	if r != nil {
		since, step = r.since, r.step
	}
	d.mu.Unlock()
	if r == nil {
		return "", false
	}
	line = fmt.Sprintf("reloading configuration for %s (%s)", time.Since(since).Round(time.Second), step)
	switch parts, _ := pipelineParts(g); {
	case len(g.failed) > 0:
		line += "; " + failedStatus(g)
	case len(parts) > 0:
		line += "; serving: " + strings.Join(parts, "; ")
	}
	return line, true
}
