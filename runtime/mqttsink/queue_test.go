package mqttsink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func payloadOf(seq uint64) []byte {
	return []byte(fmt.Sprintf("record %d %s", seq, bytes.Repeat([]byte("x"), int(seq%50))))
}

// drain reads every record after `after`, checking payloads.
func drain(t *testing.T, q *Queue, after uint64) []uint64 {
	t.Helper()
	var seqs []uint64
	for {
		seq, p, ok, err := q.Next(after)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return seqs
		}
		if !bytes.Equal(p, payloadOf(seq)) {
			t.Fatalf("seq %d: payload %q", seq, p)
		}
		seqs = append(seqs, seq)
		after = seq
	}
}

func contiguous(t *testing.T, seqs []uint64, first, last uint64) {
	t.Helper()
	if len(seqs) != int(last-first+1) || seqs[0] != first || seqs[len(seqs)-1] != last {
		t.Fatalf("got %d records %v..., want %d..%d", len(seqs), seqs[:min(len(seqs), 5)], first, last)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("gap: %d after %d", seqs[i], seqs[i-1])
		}
	}
}

// TestQueueRestart: records appended survive a reopen; the cursor says
// where to resume; wholly acknowledged segments are removed.
func TestQueueRestart(t *testing.T) {
	dir := t.TempDir()
	q, rep, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 4 << 10})
	if err != nil || rep.Records != 0 {
		t.Fatal(err, rep)
	}
	for seq := uint64(1); seq <= 500; seq++ {
		if d, err := q.Append(seq, payloadOf(seq)); err != nil || d != 0 {
			t.Fatal(d, err)
		}
	}
	contiguous(t, drain(t, q, 0), 1, 500)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	q.Ack(300)
	q.Close()
	q.Close() // idempotent

	q, rep, err = OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20, SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if rep.Acked != 300 || rep.LastSeq != 500 || rep.Records != 200 || rep.Corrupt != 0 {
		t.Fatalf("report %+v", rep)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(after) >= len(segs) {
		t.Errorf("acknowledged segments kept: %d files before, %d after", len(segs), len(after))
	}
	contiguous(t, drain(t, q, q.Acked()), 301, 500)
	// New records continue the sequence.
	q.Append(501, payloadOf(501))
	contiguous(t, drain(t, q, 300), 301, 501)
}

// TestQueueTornTail: a power cut tears the last frame (and leaves junk):
// the segment is cut there, not fatal, and appending goes on.
func TestQueueTornTail(t *testing.T) {
	dir := t.TempDir()
	q, _, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 100; seq++ {
		q.Append(seq, payloadOf(seq))
	}
	q.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	last := segs[len(segs)-1]
	b, _ := os.ReadFile(last)
	os.WriteFile(last, b[:len(b)-7], 0o640) // torn in the last frame
	q, rep, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Corrupt != 1 || rep.Truncated == 0 || rep.LastSeq != 99 {
		t.Fatalf("report %+v", rep)
	}
	contiguous(t, drain(t, q, 0), 1, 99)
	q.Append(100, payloadOf(100))
	q.Close()

	// Garbage after the last good frame, and a flipped byte in a frame.
	b, _ = os.ReadFile(last)
	os.WriteFile(last, append(b, 0, 0, 0, 3, 1, 2, 3), 0o640)
	q, rep, err = OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20})
	if err != nil || rep.Corrupt != 1 || rep.LastSeq != 100 {
		t.Fatal(err, rep)
	}
	contiguous(t, drain(t, q, 0), 1, 100)
	q.Close()
	b, _ = os.ReadFile(last)
	b[len(b)/2] ^= 0xff
	os.WriteFile(last, b, 0o640)
	q, rep, err = OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20})
	if err != nil || rep.Damaged != 1 || rep.Corrupt != 0 || rep.LastSeq != 100 {
		t.Fatal(err, rep)
	}
	if seqs := drain(t, q, 0); len(seqs) != 99 || seqs[0] != 1 || seqs[98] != 100 {
		t.Fatalf("after a flipped byte: %d records, %v...", len(seqs), seqs[:min(len(seqs), 5)])
	}
	// A torn cursor reads as nothing acknowledged: everything is resent.
	q.Ack(10)
	q.Close()
	os.WriteFile(filepath.Join(dir, "cursor"), []byte{0, 0, 0}, 0o640)
	q, rep, err = OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20})
	if err != nil || rep.Acked != 0 {
		t.Fatal(err, rep)
	}
	if seqs := drain(t, q, 0); len(seqs) != 99 {
		t.Fatalf("after a torn cursor: %d records", len(seqs))
	}
	q.Close()
}

// TestQueueBound: past MaxBytes the oldest segment goes, its records are
// counted as dropped, the reader skips the gap and the bytes stay bounded.
func TestQueueBound(t *testing.T) {
	dir := t.TempDir()
	q, _, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 10, SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	dropped := 0
	for seq := uint64(1); seq <= 5000; seq++ {
		d, err := q.Append(seq, payloadOf(seq))
		if err != nil {
			t.Fatal(err)
		}
		dropped += d
		if st := q.Stats(); st.Bytes > 64<<10 {
			t.Fatalf("seq %d: %d bytes held", seq, st.Bytes)
		}
	}
	seqs := drain(t, q, 0)
	if dropped == 0 || len(seqs)+dropped != 5000 || seqs[len(seqs)-1] != 5000 {
		t.Fatalf("dropped %d, kept %d (last %d)", dropped, len(seqs), seqs[len(seqs)-1])
	}
	contiguous(t, seqs, uint64(dropped)+1, 5000)
	var size int64
	files, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	for _, f := range files {
		st, _ := os.Stat(f)
		size += st.Size()
	}
	if size > 64<<10 {
		t.Errorf("%d bytes on disk", size)
	}
}

// TestQueueDiskFailure: a write that fails (ENOSPC) keeps the record in
// memory, the queue reports it once and goes on in memory; the order
// holds across the switch and back to disk.
func TestQueueDiskFailure(t *testing.T) {
	dir := t.TempDir()
	var fail error
	q, _, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 1 << 20, RetryEvery: 1, failWrite: func() error { return fail }})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for seq := uint64(1); seq <= 10; seq++ {
		q.Append(seq, payloadOf(seq))
	}
	fail = syscall.ENOSPC
	_, err = q.Append(11, payloadOf(11))
	if !errors.Is(err, ErrDisk) || !errors.Is(err, syscall.ENOSPC) || !q.Stats().Degraded {
		t.Fatalf("err %v, stats %+v", err, q.Stats())
	}
	for seq := uint64(12); seq <= 20; seq++ {
		q.Append(seq, payloadOf(seq))
	}
	if st := q.Stats(); st.MemBytes == 0 {
		t.Fatalf("nothing in memory: %+v", st)
	}
	fail = nil
	for seq := uint64(21); seq <= 30; seq++ {
		q.Append(seq, payloadOf(seq))
	}
	if q.Stats().Degraded {
		t.Fatal("still degraded after the disk works again")
	}
	contiguous(t, drain(t, q, 0), 1, 30)
}

// TestQueueMemoryOnly: without a folder the queue is memory only.
func TestQueueMemoryOnly(t *testing.T) {
	q, _, err := OpenQueue(QueueOptions{MaxBytes: 64 << 10, SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for seq := uint64(1); seq <= 3000; seq++ {
		if _, err := q.Append(seq, payloadOf(seq)); err != nil {
			t.Fatal(err)
		}
	}
	seqs := drain(t, q, 0)
	if seqs[len(seqs)-1] != 3000 || q.Stats().MemBytes > 64<<10 {
		t.Fatalf("last %d, %+v", seqs[len(seqs)-1], q.Stats())
	}
	q.Ack(2999)
	contiguous(t, drain(t, q, q.Acked()), 3000, 3000)
}
