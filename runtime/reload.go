package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
)

// onReload turns a hot-reload outcome into a log line, a status record on
// every sink and a STATUS= line. It runs on the Reloader's goroutine.
func (d *daemon) onReload(ev reload.Event) {
	log := d.log.With("model", ev.Model, "pipeline", ev.Target, "file", ev.Path, "generation", ev.Generation, "sha256", ev.SHAPrefix(),
		"took", ev.Duration.Round(1e6).String())
	var event, reason string
	switch ev.Outcome {
	case reload.OutcomeReloaded:
		event = "engine_reloaded"
		d.reloadSeconds.WithLabelValues(ev.Model, "ok").Observe(ev.Duration.Seconds())
		log.Info("engine reloaded", "event", event)
	case reload.OutcomeRejected:
		event, reason = "engine_rejected", rejectedReason(ev)
		d.reloadSeconds.WithLabelValues(ev.Model, trt.RejectReason(ev.Reason)).Observe(ev.Duration.Seconds())
		log.Warn("engine rejected; the previous engine keeps serving", "event", event, "reason", trt.RejectReason(ev.Reason), "err", ev.Reason)
	case reload.OutcomePending:
		event, reason = "engine_pending", pendingReason(ev)
		log.Info("model file refused for now: it was just written in place; judged when it has been left alone", "event", event,
			"reason", trt.RejectReason(ev.Reason), "judged_at", ev.Until.Format(time.TimeOnly), "err", ev.Reason)
	case reload.OutcomeMissing:
		event, reason = "engine_file_missing", errString(ev.Reason)
		log.Warn("model file missing; the loaded engine keeps serving", "event", event, "err", ev.Reason)
	case reload.OutcomeUnreadable:
		event, reason = "engine_file_unreadable", errString(ev.Reason)
		log.Warn("model file unreadable; the loaded engine keeps serving", "event", event, "err", ev.Reason)
	case reload.OutcomePolling:
		event, reason = "engine_watch_polling", errString(ev.Reason)
		log.Warn("file events unavailable; polling the model file", "event", event, "err", ev.Reason)
	case reload.OutcomeWatching:
		event = "engine_watch_ok"
		log.Info("file events available again", "event", event)
	case reload.OutcomeUnchanged:
		// After a reload request (or a file that came back): said, so
		// that the request is answered.
		event, reason = "engine_unchanged", unchangedReason(ev)
		log.Info("model file unchanged; nothing to do", "event", event, "err", ev.Reason)
	case reload.OutcomeIncomplete:
		// Not a rejection: the file changed again within the grace period.
		log.Info("model file was still being written in place; checking it again", "event", "engine_incomplete", "err", ev.Reason)
		return
	default:
		return
	}
	d.publishEngineStatus(event, ev, reason)
	d.refreshStatus()
}

// serving says which generation keeps serving, for the reasons below.
func serving(ev reload.Event) string {
	if ev.Generation == 0 {
		return "no engine is serving"
	}
	return fmt.Sprintf("generation %d (%s) keeps serving", ev.Generation, ev.ServingPrefix())
}

// rejectedReason is an engine_rejected record's reason: the reason's
// label, the sentence a person acts on (reload.Headline), that the serving
// generation stays, then the details (the backend's own words last).
func rejectedReason(ev reload.Event) string {
	return fmt.Sprintf("%s: %s; %s. Details: %s", trt.RejectReason(ev.Reason), reload.Headline(ev.Reason, ev.Path), serving(ev), trt.Details(ev.Reason))
}

// pendingReason is an engine_pending record's reason: the file is refused
// for now and judged when it has been left alone.
func pendingReason(ev reload.Event) string {
	return fmt.Sprintf("%s: %s was written in place just now and is not a usable model yet; it is judged at %s (in %s), when it has been left alone, unless it changes again; %s. Details: %s",
		trt.RejectReason(ev.Reason), filepath.Base(ev.Path), ev.Until.Format(time.TimeOnly), time.Until(ev.Until).Round(100*time.Millisecond), serving(ev), trt.Details(ev.Reason))
}

// unchangedReason is an engine_unchanged record's reason: the file holds
// what serves, or what was rejected before (not judged again).
func unchangedReason(ev reload.Event) string {
	file := filepath.Base(ev.Path)
	var j *reload.Judged
	if !errors.As(ev.Reason, &j) {
		return fmt.Sprintf("%s holds the content generation %d (%s) serves: nothing to reload", file, ev.Generation, ev.ServingPrefix())
	}
	return fmt.Sprintf("%s: %s is unchanged since it was rejected %s ago, so it is not judged again: change the file to have it checked; %s. It was rejected because: %s",
		trt.RejectReason(j.Err), file, time.Since(j.At).Round(time.Second), serving(ev), trt.Details(j.Err))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
