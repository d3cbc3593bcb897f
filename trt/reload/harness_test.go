package reload_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/trttest"
	"github.com/fsnotify/fsnotify"
)

// waitLong bounds every wait for something that must happen. It is
// generous: the machine running the tests may be heavily loaded.
const waitLong = 30 * time.Second

// harness is one model file in a temporary folder, a fake backend, one
// Hot and a Reloader, with the Reloader's events and check completions
// collected on channels.
type harness struct {
	t      *testing.T
	dir    string
	path   string
	be     *trttest.Backend
	hot    *trt.Hot
	r      *reload.Reloader
	opts   reload.Options
	events chan reload.Event
	checks chan time.Time

	mu      sync.Mutex
	written map[[32]byte]bool // every complete content written by the test
	// The last file operation began after opBegan and ended before lastOp
	// (begin, then note or op). begun: begin was called for the operation
	// under way.
	opBegan, lastOp time.Time
	begun           bool
}

// newHarness builds a harness; edit may change the options before the
// Reloader is created. Rescans are off unless edit turns them on.
func newHarness(t *testing.T, edit func(*reload.Options)) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{
		t:       t,
		dir:     dir,
		path:    filepath.Join(dir, "model.onnx"),
		be:      trttest.NewBackend(),
		hot:     &trt.Hot{},
		events:  make(chan reload.Event, 4096),
		checks:  make(chan time.Time, 4096),
		written: map[[32]byte]bool{},
	}
	h.opts = reload.Options{
		Model:    "demo",
		Debounce: 100 * time.Millisecond,
		Settle:   50 * time.Millisecond,
		Rescan:   -1,
		Grace:    time.Second, // short: many tests write bad files in place
		Budget:   func(int64) error { return nil },
		Gate:     reload.NewStagingGate(1),
	}
	if edit != nil {
		edit(&h.opts)
	}
	if h.opts.Path != "" { // a path relative to the harness folder
		h.path = filepath.Join(dir, h.opts.Path)
	}
	h.opts.Path = h.path
	if h.opts.Backend == nil {
		h.opts.Backend = h.be
	}
	h.opts.Targets = []reload.Target{{Name: "p0", Hot: h.hot}}
	h.opts.OnEvent = func(ev reload.Event) {
		select {
		case h.events <- ev:
		default:
			t.Errorf("event buffer full, dropped %v", ev)
		}
	}
	r, err := reload.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.SetCheckHook(func(start time.Time) {
		select {
		case h.checks <- start:
		default:
		}
	})
	h.r = r
	t.Cleanup(func() {
		r.Close()
		h.hot.Close()
	})
	return h
}

func model(v float32) []byte { return trttest.Spec{Value: v}.Bytes() }

// begin records that a file operation begins; note or op records its end.
func (h *harness) begin() {
	h.mu.Lock()
	h.opBegan, h.begun = time.Now(), true
	h.mu.Unlock()
}

func (h *harness) note(data []byte, complete bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if complete {
		h.written[sha256.Sum256(data)] = true
	}
	h.ended()
}

func (h *harness) op() {
	h.mu.Lock()
	h.ended()
	h.mu.Unlock()
}

// ended records the end of a file operation; h.mu is held. Without begin,
// the operation began after the previous one ended.
func (h *harness) ended() {
	if !h.begun {
		h.opBegan = h.lastOp
	}
	h.lastOp, h.begun = time.Now(), false
}

// writeInPlace truncates and rewrites path (as cp and shell redirection do).
func (h *harness) writeInPlace(name string, data []byte) {
	h.t.Helper()
	h.begin()
	if err := os.WriteFile(filepath.Join(h.dir, name), data, 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.note(data, true)
}

// replace writes a temporary file and renames it over name (the writer
// protocol edged documents).
func (h *harness) replace(name string, data []byte) {
	h.t.Helper()
	dst := filepath.Join(h.dir, name)
	tmp := dst + ".tmp"
	h.begin()
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		h.t.Fatal(err)
	}
	h.note(data, true)
}

// start writes the initial model, loads it and starts watching.
func (h *harness) start(initial []byte) {
	h.t.Helper()
	if initial != nil {
		h.replace("model.onnx", initial)
	}
	if err := h.r.Load(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.r.Start()
}

// next returns the next event.
func (h *harness) next() reload.Event {
	h.t.Helper()
	select {
	case ev := <-h.events:
		return ev
	case <-time.After(waitLong):
		h.t.Fatalf("no reload event within %s (stats %+v)", waitLong, h.r.Stats())
	}
	panic("unreachable")
}

// expect returns the next event and checks its outcome.
func (h *harness) expect(o reload.Outcome) reload.Event {
	h.t.Helper()
	ev := h.next()
	if ev.Outcome != o {
		h.t.Fatalf("event %v, want outcome %s", ev, o)
	}
	return ev
}

// settled waits for a check that started after the last file operation,
// so everything that operation caused has been looked at.
//
// The operation's end is noted just after it, and the test's goroutine can
// be descheduled in between for longer than the debounce: the check the
// operation caused then starts before the time noted, and no later check
// may ever come (a one-in-many failure under load: "no check after the
// last file operation"). A check that started while the operation was
// under way, or in that gap, is taken when no check that started later
// comes within ambiguousWait: it is the one the operation caused, unless
// the operation's last event is still to be looked at, which a later
// check would do well within that wait.
func (h *harness) settled() {
	h.t.Helper()
	h.mu.Lock()
	began, since := h.opBegan, h.lastOp
	h.mu.Unlock()
	deadline := time.After(waitLong)
	var ambiguous <-chan time.Time
	for {
		select {
		case start := <-h.checks:
			if start.After(since) {
				return
			}
			if start.After(began) && ambiguous == nil {
				ambiguous = time.After(h.ambiguousWait())
			}
		case <-ambiguous:
			return
		case <-deadline:
			h.t.Fatalf("no check after the last file operation within %s", waitLong)
		}
	}
}

// ambiguousWait is how long settled waits for a check that surely started
// after the last file operation once one that may have has come: a few
// debounce and settle periods, and room for a loaded machine.
func (h *harness) ambiguousWait() time.Duration {
	return 4*(max(h.opts.Debounce, 0)+max(h.opts.Settle, 0)) + 2*time.Second
}

// noEvent fails when an event is waiting.
func (h *harness) noEvent() {
	h.t.Helper()
	select {
	case ev := <-h.events:
		h.t.Fatalf("unexpected event %v", ev)
	default:
	}
}

// serving runs one inference on the current engine and returns its
// output value and generation.
func (h *harness) serving() (float32, uint64) {
	h.t.Helper()
	g := h.hot.Acquire()
	if g == nil {
		h.t.Fatal("no engine installed")
	}
	defer g.Release()
	if err := g.Engine.Infer(context.Background()); err != nil {
		h.t.Fatalf("inference on generation %d: %v", g.Number, err)
	}
	return g.Engine.Outputs()[0].Float32()[0], g.Number
}

func (h *harness) wantServing(value float32, gen uint64) {
	h.t.Helper()
	v, g := h.serving()
	if v != value || g != gen {
		h.t.Fatalf("serving value %v generation %d, want value %v generation %d", v, g, value, gen)
	}
}

// checkLoadedComplete fails when the backend was ever asked to load bytes
// that the test did not write as a whole (a partially written file).
func (h *harness) checkLoadedComplete() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, sum := range h.be.Loaded() {
		if !h.written[sum] {
			h.t.Errorf("load %d got content the test never wrote whole (sha256 %x): a partial file was loaded", i, sum[:6])
		}
	}
}

// deafWatcher is a real fsnotify watcher whose events never reach the
// Reloader (its Errors still do): it stands for lost events.
func deafWatcher() (reload.TestWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return deaf{w}, nil
}

type deaf struct{ w *fsnotify.Watcher }

func (d deaf) Add(name string) error         { return d.w.Add(name) }
func (d deaf) Remove(name string) error      { return d.w.Remove(name) }
func (d deaf) Close() error                  { return d.w.Close() }
func (d deaf) Events() <-chan fsnotify.Event { return nil }
func (d deaf) Errors() <-chan error          { return d.w.Errors }
