package reload

import (
	"github.com/edged-dev/edged/trt"

	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Outcome is what a reload check did for one target.
type Outcome int

// Outcomes of a reload check.
const (
	// OutcomeReloaded: a new engine was validated and installed.
	OutcomeReloaded Outcome = iota + 1
	// OutcomeRejected: the new content failed validation; the old engine
	// keeps serving. Reason wraps ErrEngineInvalid, ErrVersion,
	// ErrSignature, ErrWarmup, ErrMemory, ErrTooLarge or ErrBackend.
	// SHA256 is zero when the file was rejected before it was read
	// (too large, over the memory budget, refused from its first bytes).
	OutcomeRejected
	// OutcomeUnchanged: the file holds the content already serving
	// (reported after a manual Trigger and when a missing file comes
	// back unchanged), or, after a manual Trigger, content rejected
	// before and not changed since: Reason then wraps that rejection and
	// says when it was made; it is not judged again.
	OutcomeUnchanged
	// OutcomeMissing: the model file disappeared; the loaded engine keeps
	// serving and the file is loaded again when it reappears.
	OutcomeMissing
	// OutcomeUnreadable: the file exists but cannot be read (permissions,
	// not a regular file, I/O error).
	OutcomeUnreadable
	// OutcomePolling: file events are unavailable (inotify limits, the
	// folder is missing); changes are found by polling instead.
	OutcomePolling
	// OutcomeWatching: file events work again after OutcomePolling.
	OutcomeWatching
	// OutcomeIncomplete: the content read was refused, but the file had
	// been modified in place just before and changed again within
	// Options.Grace: an in-place writer was still writing it
	// (Reason says "incomplete?" when it grew). Not a rejection: nothing
	// is quarantined, and the new content is checked.
	OutcomeIncomplete
	// OutcomePending: the content read was refused, but the file was
	// modified in place less than Options.Grace ago, so the
	// refusal is held until Until (Grace after the modification) in case
	// a writer is still writing it; Reason is the refusal so far. Sent
	// when the hold begins; OutcomeRejected or OutcomeIncomplete follows.
	OutcomePending
)

var outcomeNames = [...]string{"", "reloaded", "rejected", "unchanged", "missing", "unreadable", "polling", "watching", "incomplete", "pending"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Event reports one outcome of a Reloader for one target.
type Event struct {
	Model   string // model name
	Target  string // target (pipeline) name
	Path    string // model file as configured
	Outcome Outcome
	// Generation is the target's serving generation after the event: the
	// new one for OutcomeReloaded, the one still serving otherwise (0 when
	// none is installed).
	Generation uint64
	// SHA256 is the hash of the content examined (for OutcomeRejected the
	// rejected content); zero when no content was read.
	SHA256 [32]byte
	// Serving is the hash of the generation serving (zero when none is
	// installed); for a rejection it differs from SHA256.
	Serving [32]byte
	// Until is, for OutcomePending, when the held refusal becomes final
	// unless the file changes first.
	Until time.Time
	// Reason says why, for every outcome but OutcomeReloaded and
	// OutcomeUnchanged.
	Reason error
	// Duration runs from the start of the check (reading the file) to
	// the outcome.
	Duration time.Duration
}

// SHAPrefix is the first 12 hex digits of SHA256, or "" when it is zero.
func (e Event) SHAPrefix() string { return shaPrefix(e.SHA256) }

// ServingPrefix is the first 12 hex digits of Serving, or "".
func (e Event) ServingPrefix() string { return shaPrefix(e.Serving) }

func shaPrefix(h [32]byte) string {
	if h == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(h[:6])
}

// Headline is the sentence a person acts on for a rejection err of the
// file at path: what is wrong and what to do, by RejectReason; the error
// itself holds the details.
func Headline(err error, path string) string {
	file := filepath.Base(path)
	switch trt.RejectReason(err) {
	case trt.ReasonInvalid:
		return file + " is not a usable model file: copy or export it again"
	case trt.ReasonVersion:
		return file + " was built by another TensorRT version than this device's: build it on this device (trtexec), or export it version-compatible"
	case trt.ReasonSignature:
		return file + "'s inputs or outputs differ from those of the engine its pipeline was built for: export it with the same tensors, or change the pipeline"
	case trt.ReasonWarmup:
		return file + " loaded, but its warm-up inference failed: check the export (precision, opset)"
	case trt.ReasonMemory:
		return file + " does not fit in the memory free now beside the serving engine: it is tried again at the next rescan"
	case trt.ReasonTooLarge:
		return file + " is larger than daemon.max_model_bytes: raise the limit or use a smaller model"
	case trt.ReasonBackend:
		return "the backend cannot load " + file + " now: it is tried again at the next rescan"
	}
	return file + " cannot be used"
}

func (e Event) String() string {
	s := fmt.Sprintf("model %s target %s: %s gen=%d", e.Model, e.Target, e.Outcome, e.Generation)
	if p := e.SHAPrefix(); p != "" {
		s += " sha256=" + p
	}
	if e.Reason != nil {
		s += ": " + e.Reason.Error()
	}
	return s
}

// transient reports whether a rejection may go away without the file
// changing; such content is retried at the next periodic rescan instead of
// being quarantined.
func transient(err error) bool {
	return errors.Is(err, trt.ErrMemory) || errors.Is(err, trt.ErrBackend)
}

// Stats are a Reloader's counters since it was created.
type Stats struct {
	Checks      uint64 // file checks after debouncing
	Reloaded    uint64 // engines installed by reloads (not the initial Load)
	Rejected    uint64 // staged engines rejected
	Unchanged   uint64 // checks that found the content already serving
	Quarantined uint64 // checks skipped because the content was rejected before
	Missing     uint64 // times the file went missing
	Unstable    uint64 // checks put off because the file was still changing
	Incomplete  uint64 // refusals dropped because the file, written in place, changed within the grace
	Rescans     uint64 // full rescans forced by ErrEventOverflow or watcher errors
	WatchErrors uint64 // errors from the file watcher, overflows included
	Polling     bool   // file events unavailable right now
	// RejectedBy counts rejections by RejectReason.
	RejectedBy map[string]uint64
}
