package trt

import (
	"errors"
	"strings"
)

// Rejection reasons as returned by RejectReason; they are stable metric
// label values.
const (
	ReasonInvalid   = "invalid"
	ReasonVersion   = "version"
	ReasonSignature = "signature"
	ReasonWarmup    = "warmup"
	ReasonMemory    = "memory"
	ReasonTooLarge  = "too_large"
	ReasonBackend   = "backend"
	ReasonOther     = "other"
)

// RejectReason names the trt sentinel err wraps, for counting and for
// status records.
func RejectReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrWarmup):
		return ReasonWarmup
	case errors.Is(err, ErrSignature):
		return ReasonSignature
	case errors.Is(err, ErrVersion):
		return ReasonVersion
	case errors.Is(err, ErrMemory):
		return ReasonMemory
	case errors.Is(err, ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, ErrBackend):
		return ReasonBackend
	case errors.Is(err, ErrEngineInvalid):
		return ReasonInvalid
	}
	return ReasonOther
}

// Details is err's message without the sentinel's words it starts with
// ("trt: invalid model file: "), which Headline says better.
func Details(err error) string {
	msg := err.Error()
	for _, s := range []error{ErrEngineInvalid, ErrVersion, ErrSignature, ErrWarmup, ErrMemory, ErrTooLarge, ErrBackend} {
		if rest, ok := strings.CutPrefix(msg, s.Error()+": "); ok && errors.Is(err, s) {
			return rest
		}
	}
	return msg
}
