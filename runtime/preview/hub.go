package preview

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/sensors/jpeg"
)

// Defaults of [daemon] preview_fps, preview_width and preview_clients.
const (
	DefaultFPS     = 5
	DefaultWidth   = 640
	DefaultClients = 4
	// MaxFPS bounds preview_fps: pictures for a person, not a recorder.
	MaxFPS = 30
)

// Settings are the [daemon] preview keys. A SIGHUP applies new ones to the
// running hub (Configure).
type Settings struct {
	Enabled bool    // preview = true
	FPS     float64 // pictures a second per picture, at most
	Width   int     // the widest picture, in pixels
	Clients int     // viewers of one picture at a time; more get 503
}

// withDefaults fills the zero fields.
func (s Settings) withDefaults() Settings {
	if s.FPS <= 0 {
		s.FPS = DefaultFPS
	}
	if s.Width <= 0 {
		s.Width = DefaultWidth
	}
	if s.Clients <= 0 {
		s.Clients = DefaultClients
	}
	return s
}

// interval is the time between two copies of a frame, in ns.
func (s *Settings) interval() int64 { return int64(1e9 / s.FPS) }

// linger is how long a tap keeps copying after a viewer last asked: a
// viewer asks at least once per picture, or every waitTimeout.
func (s *Settings) linger() int64 { return max(int64(2*waitTimeout), 3*s.interval()) }

// Options configure a Hub.
type Options struct {
	Settings Settings
	// Status is what the page shows besides the pictures; nil: nothing.
	Status func() Status
	// Encoder chooses the JPEG encoder (default: libjpeg-turbo, else
	// image/jpeg).
	Encoder jpeg.EncoderOptions
	Log     *slog.Logger
}

// Hub holds the taps of every picture (pipeline and source), across
// configuration reloads: a pipeline rebuilt by a reload gets the tap of its
// predecessor, so its viewers stay. It serves them (Register).
type Hub struct {
	opts Options
	cur  atomic.Pointer[Settings]
	log  *slog.Logger

	mu   sync.Mutex
	taps map[Key]*Tap

	encOnce sync.Once
	encInfo atomic.Pointer[jpeg.Backend]

	closeOnce sync.Once
	closed    chan struct{}
}

// ErrClosed: the hub or the tap is closed (edged stops, or the pipeline
// left the configuration).
var ErrClosed = errors.New("preview: closed")

// New returns a hub; its taps start nothing until somebody watches.
func New(o Options) *Hub {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{opts: o, log: o.Log, taps: map[Key]*Tap{}, closed: make(chan struct{})}
	h.Configure(o.Settings)
	return h
}

// Configure applies new settings: pictures from now on are taken at the
// new rate and width; viewers beyond the new limit stay until they leave;
// turned off, every viewer is cut off at its next picture.
func (h *Hub) Configure(s Settings) {
	s = s.withDefaults()
	h.cur.Store(&s)
}

func (h *Hub) settings() *Settings { return h.cur.Load() }

// Tap returns the tap of picture k, made on first use.
func (h *Hub) Tap(k Key) *Tap {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.taps[k]
	if t == nil {
		t = newTap(h, k)
		h.taps[k] = t
	}
	return t
}

// Keep closes the taps of every picture but keep's (the pictures of the
// running configuration): their viewers are told the pipeline is gone.
func (h *Hub) Keep(keep []Key) {
	h.mu.Lock()
	var gone []*Tap
	for k, t := range h.taps {
		if !slices.Contains(keep, k) {
			gone = append(gone, t)
			delete(h.taps, k)
		}
	}
	h.mu.Unlock()
	for _, t := range gone {
		t.close()
	}
}

// Close closes every tap and ends every viewer's stream; it is idempotent.
func (h *Hub) Close() {
	h.closeOnce.Do(func() { close(h.closed) })
	h.Keep(nil)
}

// lookup finds the tap of pipeline's source; source "" is the pipeline's
// only one.
func (h *Hub) lookup(pipeline, source string) (*Tap, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if source != "" {
		if t := h.taps[Key{pipeline, source}]; t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("no picture %s/%s: %s", pipeline, source, h.namesLocked())
	}
	var found []*Tap
	for k, t := range h.taps {
		if k.Pipeline == pipeline {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no pipeline %q: %s", pipeline, h.namesLocked())
	}
	var names []string
	for _, t := range found {
		names = append(names, PicturePath(t.key, ".jpg"))
	}
	sort.Strings(names)
	return nil, fmt.Errorf("pipeline %q has a picture per camera: %s", pipeline, strings.Join(names, ", "))
}

// namesLocked lists the pictures there are.
func (h *Hub) namesLocked() string {
	if len(h.taps) == 0 {
		return "there is none"
	}
	var names []string
	for k := range h.taps {
		names = append(names, PicturePath(k, ".jpg"))
	}
	sort.Strings(names)
	return "there are " + strings.Join(names, ", ")
}

// newEncoder makes a JPEG encoder for a tap's renderer; the first one's
// choice is logged (a warning when image/jpeg serves).
func (h *Hub) newEncoder() (*jpeg.Encoder, error) {
	e, err := jpeg.NewEncoder(h.opts.Encoder)
	if err != nil {
		return nil, err
	}
	b := e.Backend()
	h.encOnce.Do(func() {
		h.encInfo.Store(&b)
		if b.Warning != "" {
			h.log.Warn("preview: JPEG encoding", "encoder", b.String())
		} else {
			h.log.Info("preview: JPEG encoding", "encoder", b.String())
		}
	})
	return e, nil
}

// waitTimeout is how long a viewer waits for a picture before it is told
// there is none (a .jpg request) or asked again (a stream).
const waitTimeout = 3 * time.Second
