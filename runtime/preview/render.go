package preview

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strconv"
	"time"

	"github.com/edged-dev/edged/runtime/preview/overlay"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors/jpeg"
)

// Picture is one encoded picture of a tap, shared by its viewers.
type Picture struct {
	N             uint64 // the tap's count: 1 for its first picture
	JPEG          []byte
	Width, Height int
	Seq           uint64 // the frame's frame_seq
	TCapture      int64  // the frame's capture time, CLOCK_MONOTONIC ns
	Taken         int64  // when it was encoded, CLOCK_MONOTONIC ns
	Engine        stream.EngineRef
}

// errNoPicture: no picture came within waitTimeout.
var errNoPicture = errors.New("preview: no picture")

// start starts the tap's renderer, once: the first viewer does.
func (t *Tap) start() {
	t.startOnce.Do(func() { go t.run() })
}

// run is the tap's renderer: it turns each frame copy Finish hands over
// into a picture, until the tap is closed.
func (t *Tap) run() {
	defer close(t.done)
	var r renderer
	defer r.close()
	for {
		select {
		case <-t.closed:
			return
		case <-t.wake:
		}
		if !t.state.CompareAndSwap(copyReady, copyRendering) {
			continue
		}
		p, err := r.render(t)
		if err != nil {
			t.renderErrs.Add(1)
			why := err.Error()
			t.lastSkip.Store(&why)
			continue
		}
		t.publish(p)
	}
}

// renderer is a tap's picture, encoder and buffer, reused.
type renderer struct {
	img     *image.RGBA
	enc     *jpeg.Encoder
	scratch []byte
}

func (r *renderer) close() {
	if r.enc != nil {
		r.enc.Close()
	}
}

// render converts and draws the tap's frame copy, hands the copy back to
// the pipeline (state free), and encodes.
func (r *renderer) render(t *Tap) (*Picture, error) {
	raw := &t.raw
	w, h := raw.size()
	if r.img == nil || r.img.Rect.Dx() != w || r.img.Rect.Dy() != h {
		r.img = image.NewRGBA(image.Rect(0, 0, w, h))
	}
	raw.toRGBA(r.img)
	camW, camH := raw.f.Width*max(raw.f.Downscale, 1), raw.f.Height*max(raw.f.Downscale, 1)
	overlay.Draw(r.img, t.outs, overlay.Scale{X: float32(w) / float32(camW), Y: float32(h) / float32(camH)})
	p := &Picture{Width: w, Height: h, Seq: raw.seq, TCapture: raw.tCapture, Engine: t.engine}
	caption := t.caption(p)
	if t.noResult != "" {
		overlay.Label(r.img, r.img.Rect.Max.X, 0, "no result: "+t.noResult, overlay.Palette[0], overlay.TextScale(w))
	}
	t.state.Store(copyFree) // the pipeline may copy the next frame
	overlay.Caption(r.img, caption)
	if r.enc == nil {
		enc, err := t.hub.newEncoder()
		if err != nil {
			return nil, err
		}
		r.enc = enc
	}
	out, err := r.enc.Encode(r.scratch[:0], r.img)
	if err != nil {
		return nil, err
	}
	r.scratch = out
	p.JPEG = append([]byte(nil), out...)
	p.Taken = frameNow()
	return p, nil
}

// caption is what the picture's corner says: the picture, the frame and
// when it was captured (local time, to the millisecond).
func (t *Tap) caption(p *Picture) string {
	at := time.Now().Add(-time.Duration(frameNow() - p.TCapture))
	s := t.key.Pipeline
	if t.key.Source != "" {
		s += "/" + t.key.Source
	}
	s += "  frame " + strconv.FormatUint(p.Seq, 10) + "  " + at.Format("2006-01-02 15:04:05.000")
	if e := p.Engine; e.Name != "" {
		s += fmt.Sprintf("  %s gen %d", e.Name, e.Generation)
	}
	return s
}

// publish makes p the latest picture and wakes the viewers waiting.
func (t *Tap) publish(p *Picture) {
	t.mu.Lock()
	t.count++
	p.N = t.count
	t.latest = p
	close(t.fresh)
	t.fresh = make(chan struct{})
	t.mu.Unlock()
}

// want says a viewer wants pictures until linger from now, and starts the
// renderer.
func (t *Tap) want() {
	t.start()
	t.wantUntil.Store(frameNow() + t.hub.settings().linger())
}

// next returns the first picture after the one numbered after (0: a fresh
// one, made within the last max(1 s, 2/preview_fps)), waiting for it up
// to waitTimeout; errNoPicture when none came, ErrClosed when the tap or
// the hub closed.
func (t *Tap) next(ctx context.Context, after uint64) (*Picture, error) {
	t.want()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		t.mu.Lock()
		p, fresh, count := t.latest, t.fresh, t.count
		t.mu.Unlock()
		if after > count { // numbered by an earlier edged
			after = 0
		}
		s := t.hub.settings()
		recent := max(int64(time.Second), 2*s.interval())
		if p != nil && p.N > after && (after > 0 || frameNow()-p.Taken < recent) {
			return p, nil
		}
		select {
		case <-fresh:
			t.want()
		case <-timer.C:
			return nil, errNoPicture
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.closed:
			return nil, ErrClosed
		case <-t.hub.closed:
			return nil, ErrClosed
		}
	}
}

// acquire counts a viewer in, unless limit viewers watch already.
func (t *Tap) acquire(limit int) bool {
	if t.viewers.Add(1) > int32(limit) {
		t.viewers.Add(-1)
		return false
	}
	return true
}

func (t *Tap) leave() { t.viewers.Add(-1) }

// Viewers is how many viewers watch now.
func (t *Tap) Viewers() int { return int(t.viewers.Load()) }

// close stops the renderer (if it started) and wakes every viewer.
func (t *Tap) close() {
	t.closeOnce.Do(func() { close(t.closed) })
	t.startOnce.Do(func() { close(t.done) }) // never started: nothing to wait for
	<-t.done
}
