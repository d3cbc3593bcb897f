package runtime

import "github.com/edged-dev/edged/trt"

// onReload turns a hot-reload outcome into a log line, a status record on
// every sink and a STATUS= line. It runs on the Reloader's goroutine.
func (d *daemon) onReload(ev trt.ReloadEvent) {
	log := d.log.With("model", ev.Model, "pipeline", ev.Target, "file", ev.Path, "generation", ev.Generation, "sha256", ev.SHAPrefix(),
		"took", ev.Duration.Round(1e6).String())
	var event, reason string
	switch ev.Outcome {
	case trt.OutcomeReloaded:
		event = "engine_reloaded"
		d.reloadSeconds.WithLabelValues(ev.Model, "ok").Observe(ev.Duration.Seconds())
		log.Info("engine reloaded", "event", event)
	case trt.OutcomeRejected:
		event, reason = "engine_rejected", trt.RejectReason(ev.Reason)+": "+errString(ev.Reason)
		d.reloadSeconds.WithLabelValues(ev.Model, trt.RejectReason(ev.Reason)).Observe(ev.Duration.Seconds())
		log.Warn("engine rejected; the previous engine keeps serving", "event", event, "reason", trt.RejectReason(ev.Reason), "err", ev.Reason)
	case trt.OutcomeMissing:
		event, reason = "engine_file_missing", errString(ev.Reason)
		log.Warn("model file missing; the loaded engine keeps serving", "event", event, "err", ev.Reason)
	case trt.OutcomeUnreadable:
		event, reason = "engine_file_unreadable", errString(ev.Reason)
		log.Warn("model file unreadable; the loaded engine keeps serving", "event", event, "err", ev.Reason)
	case trt.OutcomePolling:
		event, reason = "engine_watch_polling", errString(ev.Reason)
		log.Warn("file events unavailable; polling the model file", "event", event, "err", ev.Reason)
	case trt.OutcomeWatching:
		event = "engine_watch_ok"
		log.Info("file events available again", "event", event)
	case trt.OutcomeUnchanged:
		log.Debug("model file unchanged")
		return
	case trt.OutcomeIncomplete:
		// Not a rejection: the file changed again within the grace period.
		log.Info("model file was still being written in place; checking it again", "event", "engine_incomplete", "err", ev.Reason)
		return
	default:
		return
	}
	d.publishEngineStatus(event, ev, reason)
	d.refreshStatus()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
