package runtime

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/internal/backoff"
)

// Failpoints inject faults for tests of the real binary, in the spirit of
// FreeBSD's fail(9):
//
//	EDGED_FAILPOINTS="pipeline/infer=hang:50,pipeline/preprocess=delay:200ms"
//
// Names: pipeline/infer, pipeline/preprocess, pipeline/context-lost (the
// inference fails as after a sticky CUDA error), state/write (a last-good
// copy fails with ENOSPC, as on a full disk), model/load (before a model
// is loaded for a new graph). Actions: hang[:N] (from the Nth hit on,
// block until the daemon stops), delay:DURATION[:N], stall:DURATION[:N]
// (a delay that ignores cancellation, as a TensorRT deserialisation or
// first inference inside the library does), error[:N].
// Unset in production, where a check is a nil-map test.
var failpoints = parseFailpoints(os.Getenv("EDGED_FAILPOINTS"))

type failAction struct {
	kind  string // hang, delay, error
	delay time.Duration
	after int64 // first hit that fires (1-based)
	hits  *atomic.Int64
}

func parseFailpoints(s string) map[string]failAction {
	if s == "" {
		return nil
	}
	m := map[string]failAction{}
	for _, item := range strings.Split(s, ",") {
		name, action, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		kind, arg, _ := strings.Cut(action, ":")
		a := failAction{kind: kind, after: 1, hits: new(atomic.Int64)}
		if kind == "delay" || kind == "stall" {
			var d string
			d, arg, _ = strings.Cut(arg, ":")
			a.delay, _ = time.ParseDuration(d)
		}
		if n, err := strconv.ParseInt(arg, 10, 64); err == nil && n > 0 {
			a.after = n
		}
		m[name] = a
	}
	return m
}

// failpoint runs the action configured for name; it reports whether the
// caller must fail.
func failpoint(ctx context.Context, name string) bool {
	if failpoints == nil {
		return false
	}
	a, ok := failpoints[name]
	if !ok || a.hits.Add(1) < a.after {
		return false
	}
	switch a.kind {
	case "hang":
		<-ctx.Done()
		return true
	case "delay":
		backoff.Sleep(ctx, a.delay)
	case "stall":
		time.Sleep(a.delay)
	case "error":
		return true
	}
	return false
}
