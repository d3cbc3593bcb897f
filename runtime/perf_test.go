package runtime

import (
	"strings"
	"testing"
)

// TestSlowReason: a pipeline far below its requested rate is blamed on
// the right stage: the source when the inference loop waits for frames,
// else inference or the rest of the per-frame work, whichever is larger.
func TestSlowReason(t *testing.T) {
	for _, c := range []struct {
		captured, busy, frameMs, inferMs float64
		want                             string
	}{
		{3, 0.1, 30, 25, "because the source delivers 3.0 fps"},
		{30, 0.99, 330, 300, "because inference takes 300.0 ms per frame (the model allows at most 3.3 fps here)"},
		{30, 0.99, 330, 2, "because preprocessing and post-processing take 328.0 ms per frame (inference 2.0 ms)"},
	} {
		got := slowReason(30, 3, c.captured, c.busy, c.frameMs, c.inferMs)
		if !strings.HasPrefix(got, "requested 30 fps, achieved 3.0 fps, ") || !strings.HasSuffix(got, c.want) {
			t.Errorf("slowReason(captured %g, busy %g, frame %g ms, inference %g ms) = %q, want ...%q", c.captured, c.busy, c.frameMs, c.inferMs, got, c.want)
		}
	}
}
