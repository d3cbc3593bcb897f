package preview

import (
	"sync"
	"sync/atomic"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
)

// The states of a tap's frame copy. The pipeline's goroutine moves it
// from free (or awaiting: results that never came) to filling, copies, and
// sets awaiting; Finish moves awaiting to ready with the results; the
// renderer moves ready to rendering and, once it has drawn the frame, to
// free. Nobody waits for anybody: a step that finds another state skips.
const (
	copyFree int32 = iota
	copyFilling
	copyAwaiting
	copyReady
	copyRendering
)

// Key names a picture: a pipeline and one of its sources (a batched
// pipeline has one picture per camera).
type Key struct{ Pipeline, Source string }

// Tap is where a pipeline hands frames to the preview. While nobody watches
// the pipeline's cost is one atomic load per frame (Due); while somebody
// does, one frame per 1/preview_fps is copied (the rows a picture shows)
// and its results after it, and a goroutine of the tap's own converts,
// draws and encodes it. Viewers wait for pictures; the pipeline never
// waits for them.
type Tap struct {
	key Key
	hub *Hub

	// The pipeline's side.
	wantUntil atomic.Int64 // CLOCK_MONOTONIC ns until which a viewer wants pictures
	nextDue   atomic.Int64 // the earliest time of the next copy
	state     atomic.Int32 // copyFree … copyRendering
	raw       rows         // the frame copy: the pipeline's in filling, the renderer's in ready and rendering
	outs      []stream.Output
	kp        []float32 // the keypoints of outs, which point into it
	engine    stream.EngineRef
	noResult  string        // why the frame has no results ("" when it has)
	skipped   atomic.Uint64 // frames that could not be copied
	lastSkip  atomic.Pointer[string]
	wake      chan struct{}

	startOnce  sync.Once     // the renderer, started by the first viewer
	renderErrs atomic.Uint64 // pictures that could not be made

	// The viewers' side.
	viewers atomic.Int32
	mu      sync.Mutex
	latest  *Picture
	fresh   chan struct{} // closed when a picture newer than latest is published
	count   uint64        // pictures published

	closeOnce sync.Once
	closed    chan struct{}
	done      chan struct{}
}

func newTap(h *Hub, k Key) *Tap {
	return &Tap{key: k, hub: h, wake: make(chan struct{}, 1), fresh: make(chan struct{}),
		closed: make(chan struct{}), done: make(chan struct{})}
}

// Key is the picture the tap makes.
func (t *Tap) Key() Key { return t.key }

// Due reports whether the pipeline should hand the frame it is about to
// process (at now, CLOCK_MONOTONIC ns) to Copy: a viewer watches and the
// last copy is 1/preview_fps old. It is one atomic load while nobody
// watches, and false for a nil tap.
func (t *Tap) Due(now int64) bool {
	return t != nil && now < t.wantUntil.Load() && now >= t.nextDue.Load()
}

// Copy keeps what the picture shows of f (every step-th row of it, for a
// picture at most preview_width wide), before the pipeline releases the
// frame's slot; f's bytes are not read after Copy returns. It reports
// whether it copied: not while the renderer still holds the previous copy,
// nor a frame it cannot show (counted, with the reason kept for the page).
func (t *Tap) Copy(now int64, f Frame) bool {
	st := t.state.Load()
	if (st != copyFree && st != copyAwaiting) || !t.state.CompareAndSwap(st, copyFilling) {
		return false
	}
	s := t.hub.settings()
	t.nextDue.Store(now + s.interval())
	if err := t.raw.copyFrom(f, s.Width); err != nil {
		t.state.Store(copyFree)
		t.Skip(err)
		return false
	}
	t.state.Store(copyAwaiting)
	return true
}

// Finish hands the results of the frame Copy kept (seq) to the renderer: r
// is the record the pipeline published for it, or nil when the frame gave
// no result (why says why: the picture is shown without results). It
// copies what it draws from r, which the pipeline then reuses.
func (t *Tap) Finish(seq uint64, r *stream.Record, why string) {
	if !t.state.CompareAndSwap(copyAwaiting, copyFilling) {
		return
	}
	if t.raw.seq != seq { // another frame's copy: its results are still to come
		t.state.Store(copyAwaiting)
		return
	}
	t.noResult, t.engine = why, stream.EngineRef{}
	t.outs, t.kp = t.outs[:0], t.kp[:0]
	if r != nil {
		t.engine = r.Engine
		t.copyOutputs(r.Outputs)
	}
	t.state.Store(copyReady)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// copyOutputs copies what the picture draws of outs (detections with their
// keypoints, classes; not raw values) into the tap's own slices, reused
// from frame to frame.
func (t *Tap) copyOutputs(outs []stream.Output) {
	for i := range outs {
		o := &outs[i]
		if o.Kind != stream.OutputDetections && o.Kind != stream.OutputClasses {
			continue
		}
		if len(t.outs) < cap(t.outs) {
			t.outs = t.outs[:len(t.outs)+1] // keeps the element's slices for reuse
		} else {
			t.outs = append(t.outs, stream.Output{})
		}
		c := &t.outs[len(t.outs)-1]
		dets, classes := c.Detections[:0], c.Classes[:0]
		*c = stream.Output{Name: o.Name, Kind: o.Kind, KeypointDims: o.KeypointDims}
		c.Classes = append(classes, o.Classes...)
		c.Detections = append(dets, o.Detections...)
		for j := range c.Detections {
			t.kp = append(t.kp, c.Detections[j].Keypoints...)
		}
	}
	// The detections' keypoints still point into the pipeline's buffers:
	// point them into t.kp.
	at := 0
	for i := range t.outs {
		for j := range t.outs[i].Detections {
			d := &t.outs[i].Detections[j]
			if n := len(d.Keypoints); n > 0 {
				d.Keypoints = t.kp[at : at+n : at+n]
				at += n
			}
		}
	}
}

// Skip counts a frame the pipeline could not hand over (its memory not
// readable on the host now), with the reason.
func (t *Tap) Skip(err error) {
	t.skipped.Add(1)
	why := err.Error()
	t.lastSkip.Store(&why)
}

// Skipped is how many frames the tap could not copy, and why the last one
// could not.
func (t *Tap) Skipped() (uint64, string) {
	n := t.skipped.Load()
	if p := t.lastSkip.Load(); p != nil {
		return n, *p
	}
	return n, ""
}

// frameNow is the clock of every stamp (sensors.Now: CLOCK_MONOTONIC);
// tests replace it.
var frameNow = sensors.Now
