package batch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/batch"
	"github.com/edged-dev/edged/runtime/batch/batchtest"
)

// frame is a test frame: its camera's name and its number.
type frame struct {
	cam string
	n   int
}

type rig struct {
	t     *testing.T
	clock *batchtest.Clock
	b     *batch.Batcher[frame]
	cams  []batch.Camera
	mu    sync.Mutex
	freed []frame
}

const wait = 10 * time.Millisecond

func newRig(t *testing.T, names []string, mod func(*batch.Options[frame])) *rig {
	t.Helper()
	r := &rig{t: t, clock: batchtest.NewClock()}
	opt := batch.Options[frame]{
		Cameras: 8, Batch: len(names), Wait: wait, Latest: true, Clock: r.clock,
		Release: func(f frame) { r.mu.Lock(); r.freed = append(r.freed, f); r.mu.Unlock() },
	}
	if mod != nil {
		mod(&opt)
	}
	b, err := batch.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	r.b = b
	for _, n := range names {
		c, err := b.Add(n)
		if err != nil {
			t.Fatal(err)
		}
		r.cams = append(r.cams, c)
	}
	return r
}

func (r *rig) put(cam, n int) int {
	r.t.Helper()
	rep, err := r.b.Put(context.Background(), r.cams[cam], frame{r.b.Name(r.cams[cam]), n})
	if err != nil {
		r.t.Fatal(err)
	}
	return rep
}

// next takes a batch that must be ready now (no time passes).
func (r *rig) next() *batch.Batch[frame] {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	dst := r.b.NewBatch()
	if err := r.b.Next(ctx, dst); err != nil {
		r.t.Fatalf("no batch ready: %v", err)
	}
	return dst
}

// notReady checks that no batch is ready at the clock's time.
func (r *rig) notReady() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	dst := r.b.NewBatch()
	if err := r.b.Next(ctx, dst); err == nil {
		r.t.Fatalf("a batch ran early: %v (%v)", dst.Frames, dst.Reason)
	}
}

// async takes the next batch on another goroutine, once its timer is set.
func (r *rig) async() <-chan *batch.Batch[frame] {
	ch := make(chan *batch.Batch[frame], 1)
	armed := r.clock.Armed()
	go func() {
		dst := r.b.NewBatch()
		if err := r.b.Next(context.Background(), dst); err != nil {
			dst = nil
		}
		ch <- dst
	}()
	deadline := time.Now().Add(2 * time.Second)
	for r.clock.Armed() == armed {
		if time.Now().After(deadline) {
			r.t.Fatal("Next set no timer")
		}
		time.Sleep(time.Millisecond)
	}
	return ch
}

func names(b *batch.Batch[frame]) []string {
	var s []string
	for _, f := range b.Frames {
		s = append(s, f.cam)
	}
	return s
}

func want(t *testing.T, b *batch.Batch[frame], reason batch.Reason, cams ...string) {
	t.Helper()
	if got := names(b); !slices.Equal(got, cams) || b.Reason != reason {
		t.Fatalf("batch %v (%v), want %v (%v)", got, b.Reason, cams, reason)
	}
}

func TestFullBatch(t *testing.T) {
	r := newRig(t, []string{"c0", "c1", "c2", "c3"}, func(o *batch.Options[frame]) { o.Batch = 2 })
	for i := range 4 {
		r.put(i, 0)
	}
	want(t, r.next(), batch.Full, "c0", "c1")
	want(t, r.next(), batch.Full, "c2", "c3")
	r.notReady()
}

func TestEveryLiveCameraRunsAtOnce(t *testing.T) {
	r := newRig(t, []string{"c0", "c1", "c2"}, nil)
	for i := range 3 {
		r.put(i, 0)
	}
	b := r.next()
	want(t, b, batch.Full, "c0", "c1", "c2")
	// batch 8 with three cameras: the batch cannot fill, it runs when all three have a frame.
	r2 := newRig(t, []string{"c0", "c1", "c2"}, func(o *batch.Options[frame]) { o.Batch = 8 })
	for i := range 3 {
		r2.put(i, 0)
	}
	want(t, r2.next(), batch.AllLive, "c0", "c1", "c2")
	for i := range 2 {
		r2.put(i, 1)
	}
	r2.notReady() // c2 is live: waited for
}

func TestTimeout(t *testing.T) {
	r := newRig(t, []string{"c0", "c1", "c2"}, nil)
	for i := range 3 {
		r.put(i, 0)
	}
	r.next()
	r.put(0, 1)
	r.clock.Advance(wait / 2)
	r.put(1, 1)
	ch := r.async()
	r.clock.Advance(wait/2 - 1)
	select {
	case b := <-ch:
		t.Fatalf("batch %v before its wait", names(b))
	case <-time.After(20 * time.Millisecond):
	}
	r.clock.Advance(1) // the wait from c0's frame, not c1's
	b := <-ch
	want(t, b, batch.Waited, "c0", "c1")
	if w0, w1 := b.Taken-b.Arrived[0], b.Taken-b.Arrived[1]; w0 != int64(wait) || w1 != int64(wait/2) {
		t.Fatalf("waits %v %v, want %v %v", time.Duration(w0), time.Duration(w1), wait, wait/2)
	}
}

func TestDeadCamera(t *testing.T) {
	r := newRig(t, []string{"c0", "c1", "c2"}, nil)
	for i := range 3 {
		r.put(i, 0)
	}
	r.next()
	// c2 stalls without anybody knowing: the first batch waits for it once,
	r.put(0, 1)
	r.put(1, 1)
	ch := r.async()
	r.clock.Advance(wait)
	want(t, <-ch, batch.Waited, "c0", "c1")
	// then it is late: the next batches run as soon as c0 and c1 have a frame.
	for n := 2; n < 5; n++ {
		r.put(0, n)
		r.put(1, n)
		want(t, r.next(), batch.AllLive, "c0", "c1")
	}
	// c2 delivers again: it is waited for again.
	r.put(2, 5)
	r.put(0, 5)
	r.put(1, 5)
	want(t, r.next(), batch.Full, "c0", "c1", "c2")
	r.put(0, 6)
	r.put(1, 6)
	r.notReady()
	// source_down: not waited for at all.
	r.b.SetLive(r.cams[2], false)
	want(t, r.next(), batch.AllLive, "c0", "c1")
	r.put(0, 7)
	r.put(1, 7)
	want(t, r.next(), batch.AllLive, "c0", "c1")
}

func TestFasterCameraLatest(t *testing.T) {
	r := newRig(t, []string{"fast", "slow"}, nil)
	r.put(1, 0) // both are live
	r.put(0, 0)
	r.next()
	r.put(0, 0)
	ch := r.async()
	r.clock.Advance(wait / 3)
	if r.put(0, 1) != 1 {
		t.Fatal("the newer frame did not replace the waiting one")
	}
	r.clock.Advance(wait / 3)
	r.put(0, 2)
	// the replacements did not move the deadline: the first frame's wait ends it.
	r.clock.Advance(wait - 2*(wait/3))
	b := <-ch
	want(t, b, batch.Waited, "fast")
	if b.Frames[0].n != 2 {
		t.Fatalf("batch holds frame %d of the fast camera, want the newest (2)", b.Frames[0].n)
	}
	if got := r.freed; len(got) != 2 || got[0] != (frame{"fast", 0}) || got[1].n != 1 {
		t.Fatalf("released %v, want frames 0 and 1", got)
	}
	if s := r.b.Stats(); s.Replaced != 2 || s.Batches[batch.Waited] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFasterCameraQueue(t *testing.T) {
	r := newRig(t, []string{"fast", "slow"}, func(o *batch.Options[frame]) { o.Latest, o.Depth = false, 3 })
	r.put(1, 0)
	for n := range 3 {
		r.put(0, n)
	}
	want(t, r.next(), batch.Full, "fast", "slow") // one frame per camera per batch
	// the fast camera's backlog: the slow one is waited for, once.
	ch := r.async()
	r.clock.Advance(wait)
	b := <-ch
	want(t, b, batch.Waited, "fast")
	if b.Frames[0].n != 1 {
		t.Fatalf("frame %d, want the oldest waiting (1)", b.Frames[0].n)
	}
	b = r.next()
	want(t, b, batch.AllLive, "fast")
	if b.Frames[0].n != 2 {
		t.Fatalf("frame %d, want 2", b.Frames[0].n)
	}
	if len(r.freed) != 0 {
		t.Fatalf("queue released %v", r.freed)
	}
}

func TestQueuePutWaitsForRoom(t *testing.T) {
	r := newRig(t, []string{"c0", "c1"}, func(o *batch.Options[frame]) { o.Latest, o.Depth = false, 1 })
	r.put(0, 0)
	done := make(chan error, 1)
	go func() {
		_, err := r.b.Put(context.Background(), r.cams[0], frame{"c0", 1})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Put into a full queue returned at once: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	r.put(1, 0)
	r.next()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// a Put waiting when its camera is removed gets ErrRemoved, its frame released
	go func() {
		_, err := r.b.Put(context.Background(), r.cams[0], frame{"c0", 2})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	r.b.Remove(r.cams[0])
	if err := <-done; !errors.Is(err, batch.ErrRemoved) {
		t.Fatalf("Put: %v, want ErrRemoved", err)
	}
	if len(r.freed) != 2 {
		t.Fatalf("released %v, want c0's waiting frame and the refused one", r.freed)
	}
}

func TestOldestFirstWhenMoreCamerasThanBatch(t *testing.T) {
	r := newRig(t, []string{"c0", "c1", "c2", "c3"}, func(o *batch.Options[frame]) { o.Batch = 2 })
	for _, i := range []int{3, 1, 2, 0} {
		r.put(i, 0)
		r.clock.Advance(time.Millisecond)
	}
	want(t, r.next(), batch.Full, "c1", "c3")
	want(t, r.next(), batch.Full, "c0", "c2")
}

func TestAddRemove(t *testing.T) {
	r := newRig(t, []string{"c0", "c1"}, nil)
	r.put(0, 0)
	r.put(1, 0)
	r.next()
	// a camera added is not waited for before its first frame
	c2, err := r.b.Add("c2")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.b.SetBatch(3); err != nil {
		t.Fatal(err)
	}
	if _, err := r.b.Add("c2"); !errors.Is(err, batch.ErrDuplicate) {
		t.Fatalf("second c2: %v", err)
	}
	r.cams = append(r.cams, c2)
	r.put(0, 1)
	r.put(1, 1)
	want(t, r.next(), batch.AllLive, "c0", "c1")
	r.put(2, 2)
	r.put(0, 2)
	r.put(1, 2)
	want(t, r.next(), batch.Full, "c0", "c1", "c2")
	// removing a camera the batch waits for lets it run
	r.put(0, 3)
	r.put(1, 3)
	r.notReady()
	r.b.Remove(c2)
	want(t, r.next(), batch.AllLive, "c0", "c1")
	// removing a camera releases its waiting frame
	r.put(1, 4)
	r.b.Remove(r.cams[1])
	if len(r.freed) != 1 || r.freed[0] != (frame{"c1", 4}) {
		t.Fatalf("released %v, want c1's frame 4", r.freed)
	}
	// the removed camera's handle is dead, also once its place is reused
	if _, err := r.b.Put(context.Background(), r.cams[1], frame{"c1", 4}); !errors.Is(err, batch.ErrRemoved) {
		t.Fatalf("Put to a removed camera: %v", err)
	}
	c3, err := r.b.Add("c3")
	if err != nil || c3.Index() != r.cams[1].Index() {
		t.Fatalf("c3 %v %v: want c1's place", c3, err)
	}
	if _, err := r.b.Put(context.Background(), r.cams[1], frame{"c1", 5}); !errors.Is(err, batch.ErrRemoved) {
		t.Fatalf("Put to a removed camera whose place is reused: %v", err)
	}
	if got := r.b.Cameras(); !slices.Equal(got, []string{"c0", "c3"}) {
		t.Fatalf("cameras %v", got)
	}
}

func TestClose(t *testing.T) {
	r := newRig(t, []string{"c0", "c1"}, nil)
	r.put(0, 0)
	r.put(1, 0)
	r.next()
	r.put(0, 1)
	ch := r.async()
	r.b.Close()
	r.b.Close()
	if b := <-ch; b != nil {
		t.Fatalf("Next after Close: %v", names(b))
	}
	if len(r.freed) != 1 {
		t.Fatalf("released %v, want the waiting frame", r.freed)
	}
	if _, err := r.b.Put(context.Background(), r.cams[1], frame{"c1", 1}); !errors.Is(err, batch.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if len(r.freed) != 2 {
		t.Fatal("a frame Put after Close was not released")
	}
}

func TestNextContext(t *testing.T) {
	r := newRig(t, []string{"c0", "c1"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.b.Next(ctx, r.b.NewBatch()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v", err)
	}
}

func TestSystemClockWaits(t *testing.T) {
	b, err := batch.New(batch.Options[int]{Cameras: 2, Wait: 20 * time.Millisecond, Latest: true, Release: func(int) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c0, _ := b.Add("c0")
	c1, _ := b.Add("c1")
	ctx := context.Background()
	b.Put(ctx, c0, 0)
	b.Put(ctx, c1, 0)
	dst := b.NewBatch()
	if err := b.Next(ctx, dst); err != nil || dst.Reason != batch.Full {
		t.Fatal(err, dst.Reason)
	}
	b.Put(ctx, c0, 1)
	start := time.Now()
	if err := b.Next(ctx, dst); err != nil || dst.Reason != batch.Waited {
		t.Fatal(err, dst.Reason)
	}
	if el := time.Since(start); el < 19*time.Millisecond {
		t.Fatalf("ran after %v, before its 20 ms wait", el)
	}
}

func TestOptions(t *testing.T) {
	rel := func(int) {}
	for _, o := range []batch.Options[int]{
		{Cameras: 0, Release: rel},
		{Cameras: 2},
		{Cameras: 2, Batch: 3, Release: rel},
		{Cameras: 2, Wait: -1, Release: rel},
	} {
		if _, err := batch.New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	b, _ := batch.New(batch.Options[int]{Cameras: 1, Release: rel})
	b.Add("a")
	if _, err := b.Add("b"); !errors.Is(err, batch.ErrFull) {
		t.Errorf("second camera of one place: %v", err)
	}
}

// TestBatchAllocatesNothing: a batch in steady state allocates nothing,
// whichever way it runs: full, every live camera, or on its wait.
func TestBatchAllocatesNothing(t *testing.T) {
	r := newRig(t, []string{"c0", "c1", "c2", "c3"}, func(o *batch.Options[frame]) { o.Batch = 3 })
	r.b.SetLive(r.cams[3], false)
	ctx := context.Background()
	dst := r.b.NewBatch()
	f := frame{"x", 0}
	run := func() {
		for i := range 3 { // full
			r.b.Put(ctx, r.cams[i], f)
		}
		r.b.Put(ctx, r.cams[0], f) // a replacement
		r.b.Next(ctx, dst)
		r.b.Put(ctx, r.cams[0], f) // on its wait
		r.clock.Advance(wait)
		r.b.Next(ctx, dst)
		r.b.Put(ctx, r.cams[0], f) // every live camera (1 and 2 are late)
		r.b.Next(ctx, dst)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per round of three batches, want 0", n)
	}
	s := r.b.Stats()
	if s.Batches[batch.Full] == 0 || s.Batches[batch.Waited] == 0 || s.Batches[batch.AllLive] == 0 {
		t.Fatalf("not every kind of batch ran: %+v", s)
	}
}

// TestNextUntil: NextUntil returns ok false, no error, when its channel
// fires before a batch runs (the caller's idle tick), a batch when one is
// ready, and the context's error.
func TestNextUntil(t *testing.T) {
	r := newRig(t, []string{"c0", "c1"}, nil)
	dst := r.b.NewBatch()
	fired := make(chan time.Time, 1)
	fired <- time.Time{}
	if ok, err := r.b.NextUntil(context.Background(), dst, fired); ok || err != nil {
		t.Fatalf("with nothing waiting and the channel fired: ok %v, err %v", ok, err)
	}
	r.put(0, 1)
	r.put(1, 1)
	if ok, err := r.b.NextUntil(context.Background(), dst, make(chan time.Time)); !ok || err != nil {
		t.Fatalf("with a full batch: ok %v, err %v", ok, err)
	}
	want(t, dst, batch.Full, "c0", "c1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := r.b.NextUntil(ctx, dst, nil); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: ok %v, err %v", ok, err)
	}
}
