package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of a Batcher.
var (
	ErrClosed    = errors.New("batch: closed")
	ErrRemoved   = errors.New("batch: camera removed")
	ErrFull      = errors.New("batch: no room for another camera")
	ErrDuplicate = errors.New("batch: camera already added")
)

// DefaultWait is batch_wait's default: how long the first frame of a batch
// waits for the other cameras' frames. Chosen from BenchmarkPolicy (a
// simulation of this package's policy: eight 30 fps cameras, an engine
// whose inference of n frames takes 15 % fixed + 85 % per frame, as in
// NVIDIA's YOLOv7 figures for AGX Orin; docs/PERFORMANCE.md): when the
// cameras run free the engine batches what came during the previous
// inference anyway, so any wait only adds latency (2 ms adds about 2.5 ms
// to the p99) and saves 1-2 % of the engine; when cameras are triggered
// together (within a millisecond of each other) a 2 ms wait puts all
// eight in one inference instead of two of four, saving the engine a
// fixed cost per frame. Longer waits buy nothing more there and cost
// their length everywhere.
const DefaultWait = 2 * time.Millisecond

// Reason says why a batch ran.
type Reason uint8

// Reasons a batch runs.
const (
	Full    Reason = iota + 1 // as many frames as the batch size
	AllLive                   // every live camera had a frame
	Waited                    // the wait passed since its first frame
)

func (r Reason) String() string {
	switch r {
	case Full:
		return "full"
	case AllLive:
		return "all"
	case Waited:
		return "waited"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Camera names one camera of a Batcher (from Add). A camera removed and
// another added in its place get different values.
type Camera struct {
	idx int
	gen uint32
}

// Index is the camera's place, below Options.Cameras (a removed camera's
// place is reused).
func (c Camera) Index() int { return c.idx }

// Options configure a Batcher.
type Options[F any] struct {
	// Cameras is the most cameras at once (the state is sized by it).
	Cameras int
	// Batch is the most frames per batch: 1 to Cameras (0: Cameras).
	Batch int
	// Wait is how long the first frame of a batch waits (0: none; a
	// batch runs with what is there).
	Wait time.Duration
	// Latest: a newer frame of a camera replaces the one waiting (schedule
	// = "latest"); else frames wait in order, Depth per camera.
	Latest bool
	// Depth is how many frames a camera may have waiting without Latest
	// (0: 1); Put waits for room beyond it.
	Depth int
	// Release is called with each frame the Batcher drops: replaced by a
	// newer one, of a removed camera, or waiting at Close. Required.
	Release func(F)
	// Clock times the wait; nil: the system's monotonic clock.
	Clock Clock
}

// Batch is the frames of one inference. Fill it with Next; reuse it.
type Batch[F any] struct {
	Frames  []F
	Cameras []Camera // the camera of each frame
	Arrived []int64  // when each frame was put (the Clock's ns)
	Taken   int64    // when Next returned it: Taken - Arrived[i] is frame i's wait
	Reason  Reason
}

// Len is the number of frames in the batch.
func (b *Batch[F]) Len() int { return len(b.Frames) }

// Stats are counters of a Batcher.
type Stats struct {
	Batches  [4]uint64 // by Reason (index 0 unused)
	Frames   uint64    // frames handed out in batches
	Replaced uint64    // frames a newer one of their camera replaced (Latest)
}

type camera[F any] struct {
	name    string
	gen     uint32
	used    bool
	live    bool // delivered since added or since SetLive(true); not SetLive(false)
	late    bool // had no frame when a batch ran on its wait; cleared by its next frame
	frames  []F  // ring of Depth
	arrived []int64
	head, n int
	since   int64         // when the first of its waiting frames came (Latest: not moved by replacing)
	room    chan struct{} // cap 1: a frame was taken or the camera removed
}

// Batcher forms batches of frames from several cameras. Put, SetLive, Add
// and Remove may be called from any goroutine; Next from one at a time.
type Batcher[F any] struct {
	opt   Options[F]
	clock Clock
	timer Timer

	mu     sync.Mutex
	cams   []camera[F]
	batch  int
	closed bool
	stats  Stats
	pick   []int // scratch of Next

	wake chan struct{} // cap 1: something changed for Next
	done chan struct{} // closed by Close
	once sync.Once
}

// New makes a Batcher.
func New[F any](opt Options[F]) (*Batcher[F], error) {
	if opt.Cameras < 1 {
		return nil, fmt.Errorf("batch: %d cameras: want at least 1", opt.Cameras)
	}
	if opt.Release == nil {
		return nil, errors.New("batch: no Release")
	}
	if opt.Wait < 0 {
		return nil, fmt.Errorf("batch: wait %v is negative", opt.Wait)
	}
	if opt.Depth < 1 || opt.Latest {
		opt.Depth = 1
	}
	if opt.Clock == nil {
		opt.Clock = System{}
	}
	b := &Batcher[F]{
		opt:   opt,
		clock: opt.Clock,
		timer: opt.Clock.NewTimer(),
		cams:  make([]camera[F], opt.Cameras),
		pick:  make([]int, 0, opt.Cameras),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	if err := b.SetBatch(opt.Batch); err != nil {
		return nil, err
	}
	for i := range b.cams {
		c := &b.cams[i]
		c.frames = make([]F, opt.Depth)
		c.arrived = make([]int64, opt.Depth)
		c.room = make(chan struct{}, 1)
	}
	return b, nil
}

// SetBatch changes the most frames per batch (0: Options.Cameras).
func (b *Batcher[F]) SetBatch(n int) error {
	if n == 0 {
		n = len(b.cams)
	}
	if n < 1 || n > len(b.cams) {
		return fmt.Errorf("batch: batch size %d: want 1 to %d", n, len(b.cams))
	}
	b.mu.Lock()
	b.batch = n
	b.mu.Unlock()
	b.signal()
	return nil
}

// NewBatch makes a Batch that holds the largest batch without growing.
func (b *Batcher[F]) NewBatch() *Batch[F] {
	n := len(b.cams)
	return &Batch[F]{Frames: make([]F, 0, n), Cameras: make([]Camera, 0, n), Arrived: make([]int64, 0, n)}
}

// Add adds a camera. It is not waited for until its first frame.
func (b *Batcher[F]) Add(name string) (Camera, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Camera{}, ErrClosed
	}
	free := -1
	for i := range b.cams {
		c := &b.cams[i]
		if c.used && c.name == name {
			return Camera{}, fmt.Errorf("%w: %q", ErrDuplicate, name)
		}
		if !c.used && free < 0 {
			free = i
		}
	}
	if free < 0 {
		return Camera{}, fmt.Errorf("%w: %q: all %d places are taken", ErrFull, name, len(b.cams))
	}
	c := &b.cams[free]
	c.gen++
	c.used, c.live, c.late, c.name, c.head, c.n = true, false, false, name, 0, 0
	return Camera{idx: free, gen: c.gen}, nil
}

// Remove removes a camera: its waiting frames are released, a Put waiting
// for room returns ErrRemoved, and batches no longer wait for it.
func (b *Batcher[F]) Remove(cam Camera) {
	b.mu.Lock()
	c := b.camLocked(cam)
	if c == nil {
		b.mu.Unlock()
		return
	}
	c.used = false
	c.gen++
	drop := b.takeAllLocked(c)
	b.mu.Unlock()
	b.releaseAll(drop)
	notify(c.room)
	b.signal()
}

// SetLive says whether a camera delivers: false when its source is down or
// ended (batches stop waiting for it), true when it is up again (its next
// frame says so too).
func (b *Batcher[F]) SetLive(cam Camera, live bool) {
	b.mu.Lock()
	if c := b.camLocked(cam); c != nil {
		c.live, c.late = live, false
	}
	b.mu.Unlock()
	b.signal()
}

// Put hands the Batcher a frame of cam. With Latest it replaces the
// camera's waiting frame (released; replaced = 1); else it waits for room
// in the camera's queue, the context, Remove or Close. On an error f has
// been released.
func (b *Batcher[F]) Put(ctx context.Context, cam Camera, f F) (replaced int, err error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			b.opt.Release(f)
			return 0, ErrClosed
		}
		c := b.camLocked(cam)
		if c == nil {
			b.mu.Unlock()
			b.opt.Release(f)
			return 0, ErrRemoved
		}
		now := b.clock.Now()
		if b.opt.Latest && c.n == 1 {
			old := c.frames[c.head]
			c.frames[c.head], c.arrived[c.head] = f, now
			c.live, c.late = true, false
			b.stats.Replaced++
			b.mu.Unlock()
			b.opt.Release(old)
			b.signal()
			return 1, nil
		}
		if c.n < len(c.frames) {
			if c.n == 0 {
				c.since = now
			}
			i := (c.head + c.n) % len(c.frames)
			c.frames[i], c.arrived[i] = f, now
			c.n++
			c.live, c.late = true, false
			b.mu.Unlock()
			b.signal()
			return 0, nil
		}
		b.mu.Unlock()
		select {
		case <-c.room:
		case <-b.done:
		case <-ctx.Done():
			b.opt.Release(f)
			return 0, ctx.Err()
		}
	}
}

// Next waits for a batch and fills dst with it: until the policy says it
// runs, the context ends (its error) or Close (ErrClosed).
func (b *Batcher[F]) Next(ctx context.Context, dst *Batch[F]) error {
	_, err := b.NextUntil(ctx, dst, nil)
	return err
}

// NextUntil is Next that also gives up when until fires (ok false, no
// error): a caller with work of its own while no frame comes (a watchdog
// stamp) passes its reused timer's channel.
func (b *Batcher[F]) NextUntil(ctx context.Context, dst *Batch[F], until <-chan time.Time) (ok bool, err error) {
	for {
		ok, deadline, err := b.TryNext(dst)
		if ok || err != nil {
			return ok, err
		}
		var fired <-chan time.Time
		if deadline != 0 {
			b.timer.Reset(deadline)
			fired = b.timer.C()
		}
		select {
		case <-b.wake:
		case <-fired:
		case <-b.done:
		case <-until:
			b.timer.Stop()
			return false, nil
		case <-ctx.Done():
			b.timer.Stop()
			return false, ctx.Err()
		}
		b.timer.Stop()
	}
}

// TryNext fills dst with a batch if the policy says one runs now (ok);
// else deadline is the Clock's instant its wait ends (0: no frame waits).
// Next is TryNext until a batch runs; a caller that keeps its own time
// (a simulation) calls TryNext at the instants it says.
func (b *Batcher[F]) TryNext(dst *Batch[F]) (ok bool, deadline int64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, 0, ErrClosed
	}
	now := b.clock.Now()
	reason, deadline := b.readyLocked(now)
	if reason == 0 {
		return false, deadline, nil
	}
	b.takeLocked(dst, now, reason)
	return true, 0, nil
}

// readyLocked says whether a batch runs now and why, else the deadline of
// its wait (0: no frame waits).
func (b *Batcher[F]) readyLocked(now int64) (Reason, int64) {
	count, missing := 0, 0
	var first int64
	for i := range b.cams {
		c := &b.cams[i]
		switch {
		case !c.used:
		case c.n > 0:
			if count == 0 || c.since < first {
				first = c.since
			}
			count++
		case c.live && !c.late:
			missing++
		}
	}
	switch {
	case count == 0:
		return 0, 0
	case count >= b.batch:
		return Full, 0
	case missing == 0:
		return AllLive, 0
	}
	deadline := first + int64(b.opt.Wait)
	if now >= deadline {
		return Waited, 0
	}
	return 0, deadline
}

// takeLocked moves the batch's frames into dst: the oldest waiting frame
// of up to batch cameras, listed in camera order.
func (b *Batcher[F]) takeLocked(dst *Batch[F], now int64, reason Reason) {
	pick := b.pick[:0]
	for i := range b.cams {
		if c := &b.cams[i]; c.used && c.n > 0 {
			pick = append(pick, i)
		}
	}
	if len(pick) > b.batch {
		// The batch oldest first: a selection of the batch smallest
		// arrivals (of at most Cameras entries), then back to camera order.
		for k := 0; k < b.batch; k++ {
			m := k
			for j := k + 1; j < len(pick); j++ {
				if b.headArrival(pick[j]) < b.headArrival(pick[m]) {
					m = j
				}
			}
			pick[k], pick[m] = pick[m], pick[k]
		}
		pick = pick[:b.batch]
		for k := 1; k < len(pick); k++ {
			for j := k; j > 0 && pick[j] < pick[j-1]; j-- {
				pick[j], pick[j-1] = pick[j-1], pick[j]
			}
		}
	}
	dst.Frames, dst.Cameras, dst.Arrived = dst.Frames[:0], dst.Cameras[:0], dst.Arrived[:0]
	var zero F
	for _, i := range pick {
		c := &b.cams[i]
		dst.Frames = append(dst.Frames, c.frames[c.head])
		dst.Cameras = append(dst.Cameras, Camera{idx: i, gen: c.gen})
		dst.Arrived = append(dst.Arrived, c.arrived[c.head])
		c.frames[c.head] = zero
		c.head = (c.head + 1) % len(c.frames)
		c.n--
		if c.n > 0 {
			c.since = c.arrived[c.head]
		}
		notify(c.room)
	}
	if reason == Waited {
		for i := range b.cams {
			if c := &b.cams[i]; c.used && c.live && c.n == 0 && !b.picked(pick, i) {
				c.late = true
			}
		}
	}
	b.pick = pick
	dst.Taken, dst.Reason = now, reason
	b.stats.Batches[reason]++
	b.stats.Frames += uint64(len(pick))
}

func (b *Batcher[F]) picked(pick []int, i int) bool {
	for _, p := range pick {
		if p == i {
			return true
		}
	}
	return false
}

func (b *Batcher[F]) headArrival(i int) int64 {
	c := &b.cams[i]
	return c.arrived[c.head]
}

// Stats returns the counters.
func (b *Batcher[F]) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Cameras returns the names of the cameras added, in their order.
func (b *Batcher[F]) Cameras() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	for i := range b.cams {
		if b.cams[i].used {
			names = append(names, b.cams[i].name)
		}
	}
	return names
}

// Name is the name cam was added with ("" once removed).
func (b *Batcher[F]) Name(cam Camera) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.camLocked(cam); c != nil {
		return c.name
	}
	return ""
}

// Close releases every waiting frame and ends Next and Put with ErrClosed.
// It is idempotent.
func (b *Batcher[F]) Close() error {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		var drop []F
		for i := range b.cams {
			drop = append(drop, b.takeAllLocked(&b.cams[i])...)
		}
		b.mu.Unlock()
		close(b.done)
		b.timer.Stop()
		b.releaseAll(drop)
	})
	return nil
}

func (b *Batcher[F]) camLocked(cam Camera) *camera[F] {
	if cam.idx < 0 || cam.idx >= len(b.cams) {
		return nil
	}
	c := &b.cams[cam.idx]
	if !c.used || c.gen != cam.gen {
		return nil
	}
	return c
}

// takeAllLocked empties c's queue and returns its frames.
func (b *Batcher[F]) takeAllLocked(c *camera[F]) []F {
	var out []F
	var zero F
	for ; c.n > 0; c.n-- {
		out = append(out, c.frames[c.head])
		c.frames[c.head] = zero
		c.head = (c.head + 1) % len(c.frames)
	}
	c.head = 0
	return out
}

func (b *Batcher[F]) releaseAll(fs []F) {
	for _, f := range fs {
		b.opt.Release(f)
	}
}

func (b *Batcher[F]) signal() { notify(b.wake) }

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
