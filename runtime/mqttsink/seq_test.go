package mqttsink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
)

// offlineSink is a sink whose broker is never there (nothing listens on
// the port), on the clock now.
func offlineSink(t *testing.T, dir string, now time.Time, retry time.Duration) *Sink {
	t.Helper()
	o := Options{URL: mustURL(t, "mqtt://127.0.0.1:1"), QoS: 1, Dir: dir, clock: func() time.Time { return now }}
	o.queueOptions.RetryEvery = retry
	return newTestSink(t, o, nil)
}

// runOf publishes n results and stops the sink cleanly; it returns the
// run's first and last seq.
func runOf(t *testing.T, s *Sink, n int) (first, last uint64) {
	t.Helper()
	for i := range n {
		s.Publish(result("front", uint64(i)))
	}
	st := s.Stats()
	s.Close()
	return st.FirstSeq, st.LastSeq
}

// started reads the first record of a sink's queue: its sink_started.
func started(t *testing.T, s *Sink) stream.Decoded {
	t.Helper()
	waitFor(t, "the first record in the queue", 5*time.Second, func() bool { return s.Stats().Unpublished == 0 })
	first := s.Stats().FirstSeq
	var p []byte
	for after := s.q.Acked(); ; {
		seq, payload, ok, _ := s.q.Next(after)
		if !ok || seq > first {
			t.Fatalf("no record at seq %d in the queue", first)
		}
		if seq == first {
			p = payload
			break
		}
		after = seq
	}
	seq := first
	_, body := splitPayload(p)
	var d stream.Decoded
	if err := stream.DecodeJSON(body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Event != EventStarted || d.Seq != seq || d.Seq != s.Stats().FirstSeq {
		t.Fatalf("first record %+v (seq %d), want %s at the run's first seq", d, seq, EventStarted)
	}
	return d
}

// TestMQTTSeqNeverReused is the MQTT finding of a state folder that was
// read-only at start: the next run started at seq 1 again with the same
// device id, and a consumer deduplicating by (device, seq) dropped its
// records. Each run now starts above what the state folder records and
// above the wall clock in µs, and says so in its first record
// (sink_started); whatever the folder did between two runs, the second
// starts above every seq of the first:
func TestMQTTSeqNeverReused(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	t.Run("clean restart, the clock stepped back a day (no RTC battery)", func(t *testing.T) {
		dir := t.TempDir()
		_, last := runOf(t, offlineSink(t, dir, t0, 0), 10)
		s2 := offlineSink(t, dir, t0.Add(-24*time.Hour), 0)
		if f := s2.Stats().FirstSeq; f != last+1 {
			t.Errorf("second run starts at %d, want %d (the seq file's last + 1)", f, last+1)
		}
		if r := started(t, s2).Reason; !strings.Contains(r, "stopped cleanly at seq") {
			t.Errorf("sink_started: %s", r)
		}
	})
	t.Run("state folder wiped", func(t *testing.T) {
		dir := t.TempDir()
		_, last := runOf(t, offlineSink(t, dir, t0, 0), 10)
		os.RemoveAll(dir)
		s2 := offlineSink(t, dir, t0.Add(time.Second), 0)
		if f := s2.Stats().FirstSeq; f <= last || f != uint64(t0.Add(time.Second).UnixMicro()) {
			t.Errorf("second run starts at %d after %d", f, last)
		}
		if r := started(t, s2).Reason; !strings.Contains(r, "records no earlier seq") {
			t.Errorf("sink_started: %s", r)
		}
	})
	t.Run("state folder unusable at start, then usable", func(t *testing.T) {
		state := t.TempDir()
		dir := filepath.Join(state, "mqtt", "cloud")
		os.WriteFile(filepath.Join(state, "mqtt"), nil, 0o640) // a file where the folder goes
		s1 := offlineSink(t, dir, t0, time.Hour)
		if st := s1.Stats(); !st.Degraded {
			t.Fatalf("stats %+v, want degraded", st)
		}
		if r := started(t, s1).Reason; !strings.Contains(r, "cannot be used") {
			t.Errorf("sink_started: %s", r)
		}
		_, last := runOf(t, s1, 10)
		os.Remove(filepath.Join(state, "mqtt"))
		s2 := offlineSink(t, dir, t0.Add(time.Second), 0)
		if f := s2.Stats().FirstSeq; f <= last {
			t.Errorf("second run starts at %d after %d", f, last)
		}
	})
	t.Run("crash: the reservation covers what was queued", func(t *testing.T) {
		dir := t.TempDir()
		q, _, err := OpenQueue(QueueOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		base := uint64(t0.UnixMicro())
		for seq := base; seq < base+100; seq++ {
			q.Append(seq, payloadOf(seq))
		}
		q.closeFiles() // no clean stop
		_, rep, err := OpenQueue(QueueOptions{Dir: dir})
		if err != nil || !rep.HighWaterKnown || rep.Clean || rep.HighWater < base+99 {
			t.Fatalf("after a crash: %v %+v", err, rep)
		}
		if f := firstSeq(rep, t0.Add(-time.Hour)); f <= base+99 {
			t.Errorf("after a crash with the clock back an hour: first seq %d, last queued %d", f, base+99)
		}
	})
	t.Run("torn seq file: the other slot", func(t *testing.T) {
		dir := t.TempDir()
		_, last := runOf(t, offlineSink(t, dir, t0, 0), 10)
		f, _ := os.OpenFile(filepath.Join(dir, seqName), os.O_RDWR, 0)
		st, _ := readSeqState(f)
		f.WriteAt([]byte{0xde, 0xad}, int64(st.gen%2)*seqSlot+10) // tear the newest slot
		f.Close()
		_, rep, err := OpenQueue(QueueOptions{Dir: dir})
		if err != nil || !rep.HighWaterKnown || rep.HighWater >= last && rep.Clean {
			t.Fatalf("%v %+v", err, rep)
		}
		// The older slot is the run's reservation: above its last seq.
		if f := firstSeq(rep, t0.Add(-24*time.Hour)); f <= last {
			t.Errorf("first seq %d after %d", f, last)
		}
	})
}

// TestMQTTQueueFolderRetried: a folder that cannot be used at start is
// tried again every RetryEvery even when no record comes; when it works,
// the sink says so (QueueRestored, sink_queue_restored, Degraded false)
// and the records kept in memory meanwhile are in its files.
func TestMQTTQueueFolderRetried(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "mqtt", "cloud")
	os.WriteFile(filepath.Join(state, "mqtt"), nil, 0o640)
	ev := &events{}
	o := Options{URL: mustURL(t, "mqtt://127.0.0.1:1"), QoS: 1, Dir: dir, Root: state}
	o.queueOptions.RetryEvery = 200 * time.Millisecond
	s := newTestSink(t, o, ev)
	for i := range 20 {
		s.Publish(result("front", uint64(i)))
	}
	if !hasStatus(ev.statuses(), "sink_queue_degraded", "cannot be opened", "tried again") || !s.Stats().Degraded {
		t.Fatalf("statuses %q, stats %+v", ev.statuses(), s.Stats())
	}
	os.Remove(filepath.Join(state, "mqtt"))
	waitFor(t, "sink_queue_restored", 5*time.Second, func() bool { return hasStatus(ev.statuses(), "sink_queue_restored") })
	if e := ev.find(QueueOpened); e == nil || !e.Report.Late {
		t.Errorf("no late QueueOpened: %+v", ev.evs)
	}
	if st := s.Stats(); st.Degraded || st.Queued != 21 {
		t.Errorf("stats %+v", st)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	var size int64
	for _, f := range segs {
		fi, _ := os.Stat(f)
		size += fi.Size()
	}
	if size == 0 || size != s.Stats().QueueBytes {
		t.Errorf("%d bytes in %v, queue holds %d", size, segs, s.Stats().QueueBytes)
	}
}

// TestMQTTQueueRefusesLinksOutOfTheStateFolder: the queue's folder is made
// inside the state folder and no symbolic link out of it is followed: a
// state_dir/mqtt that links elsewhere is a folder the queue cannot use
// (degraded, named), and nothing is written where it leads.
func TestMQTTQueueRefusesLinksOutOfTheStateFolder(t *testing.T) {
	state, elsewhere := t.TempDir(), t.TempDir()
	os.Symlink(elsewhere, filepath.Join(state, "mqtt"))
	ev := &events{}
	o := Options{URL: mustURL(t, "mqtt://127.0.0.1:1"), QoS: 1, Dir: filepath.Join(state, "mqtt", "cloud"), Root: state}
	s := newTestSink(t, o, ev)
	s.Publish(result("front", 0))
	if !hasStatus(ev.statuses(), "sink_queue_degraded", "leads out of the state folder") || !s.Stats().Degraded {
		t.Fatalf("statuses %q, stats %+v", ev.statuses(), s.Stats())
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("written outside the state folder: %v", ents)
	}
}
