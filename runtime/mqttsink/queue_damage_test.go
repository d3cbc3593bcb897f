package mqttsink

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// fill writes records 1..n into a fresh queue in dir and closes it; it
// returns the segment files.
func fill(t *testing.T, dir string, n uint64, segBytes int64) []string {
	t.Helper()
	q, _, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= n; seq++ {
		if _, err := q.Append(seq, payloadOf(seq)); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	return segs
}

// frameAt returns the offset of seq's frame in a segment written by fill.
func frameAt(t *testing.T, b []byte, seq uint64) int {
	t.Helper()
	for off := 0; off < len(b); {
		s, _, n, err := ParseFrame(b[off:])
		if err != nil {
			t.Fatal(err)
		}
		if s == seq {
			return off
		}
		off += n
	}
	t.Fatalf("seq %d not in the segment", seq)
	return 0
}

// missing lists the seqs of 1..n that drain did not return.
func missing(seqs []uint64, n uint64) []uint64 {
	var out []uint64
	for seq := uint64(1); seq <= n; seq++ {
		if !slices.Contains(seqs, seq) {
			out = append(out, seq)
		}
	}
	return out
}

// TestQueueDamageCostsOnlyItsRecord is the MQTT finding of a flipped byte
// a quarter into a segment: opening cut the segment there, 114 records
// lost, 113 of them intact. Now opening steps over damage to the next
// frame that checks (length, seq order, CRC): a flipped byte anywhere in
// a frame (length, seq, CRC or payload) costs that frame's record, a
// zeroed stretch over two frames costs those two, and what follows is
// delivered; only a torn tail is cut off.
func TestQueueDamageCostsOnlyItsRecord(t *testing.T) {
	const n = 400
	cases := []struct {
		name   string
		damage func(b []byte) []uint64 // damages b, returns the seqs it hits
	}{
		{"byte a quarter in (payload)", func(b []byte) []uint64 {
			off := len(b) / 4
			seq := seqAt(t, b, off)
			b[off] ^= 0x5a
			return []uint64{seq}
		}},
		{"length field", func(b []byte) []uint64 {
			off := frameAt(t, b, 150)
			b[off+1] ^= 0xff // a length of megabytes: past what is left
			return []uint64{150}
		}},
		{"length field, small", func(b []byte) []uint64 {
			off := frameAt(t, b, 151)
			b[off+3] ^= 0x01 // one byte off: the CRC fails
			return []uint64{151}
		}},
		{"seq field", func(b []byte) []uint64 {
			off := frameAt(t, b, 152)
			b[off+11] ^= 0x04
			return []uint64{152}
		}},
		{"CRC field", func(b []byte) []uint64 {
			off := frameAt(t, b, 153)
			b[off+12] ^= 0x80
			return []uint64{153}
		}},
		{"first frame", func(b []byte) []uint64 {
			b[20] ^= 0x01
			return []uint64{1}
		}},
		{"zeroed across two frames", func(b []byte) []uint64 {
			off := frameAt(t, b, 200)
			next := frameAt(t, b, 201)
			clear(b[off+20 : next+20])
			return []uint64{200, 201}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := fill(t, dir, n, 1<<20) // one segment
			if len(segs) != 1 {
				t.Fatalf("%d segments", len(segs))
			}
			b, _ := os.ReadFile(segs[0])
			want := c.damage(b)
			os.WriteFile(segs[0], b, 0o640)
			q, rep, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			lost := missing(drain(t, q, 0), n)
			if !slices.Equal(lost, want) || rep.Damaged != 1 || rep.Truncated != 0 || rep.LastSeq != n {
				t.Fatalf("lost %d records %v, want %v; report %+v", len(lost), lost[:min(len(lost), 10)], want, rep)
			}
			if st := q.Stats(); st.Damaged != 1 {
				t.Errorf("stats %+v", st)
			}
			// Appending goes on after the damage.
			q.Append(n+1, payloadOf(n+1))
			if seqs := drain(t, q, n); !slices.Equal(seqs, []uint64{n + 1}) {
				t.Errorf("after appending: %v", seqs)
			}
		})
	}
}

// seqAt is the seq of the frame that covers offset off.
func seqAt(t *testing.T, b []byte, off int) uint64 {
	for at := 0; at < len(b); {
		seq, _, n, err := ParseFrame(b[at:])
		if err != nil {
			t.Fatal(err)
		}
		if off < at+n {
			return seq
		}
		at += n
	}
	t.Fatal("offset past the frames")
	return 0
}

// TestQueueDamageFoundWhileReading: damage that appears while the queue
// is open (the file changed under it) is stepped over by the reader too,
// counted, and costs only its record.
func TestQueueDamageFoundWhileReading(t *testing.T) {
	dir := t.TempDir()
	q, _, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for seq := uint64(1); seq <= 300; seq++ {
		q.Append(seq, payloadOf(seq))
	}
	q.Sync()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	b, _ := os.ReadFile(segs[0])
	off := frameAt(t, b, 100) + 18
	f, _ := os.OpenFile(segs[0], os.O_WRONLY, 0)
	f.WriteAt([]byte{b[off] ^ 0x33}, int64(off))
	f.Close()
	lost := missing(drain(t, q, 0), 300)
	if !slices.Equal(lost, []uint64{100}) || q.Stats().Damaged != 1 {
		t.Fatalf("lost %d records %v, stats %+v", len(lost), lost[:min(len(lost), 10)], q.Stats())
	}
	// Read again from the start: the hole is remembered, nothing else lost.
	if lost := missing(drain(t, q, 0), 300); !slices.Equal(lost, []uint64{100}) || q.Stats().Damaged != 1 {
		t.Fatalf("second pass: lost %v, stats %+v", lost, q.Stats())
	}
}

// TestQueueLengthCheckedBeforeAllocating: every frame declares a length;
// one that declares up to 4 GiB is checked against MaxPayload and the
// bytes left before anything is allocated for it. A 1 MiB segment whose
// every frame claims 0xffffff00 bytes opens (and reads) with a few MiB
// allocated at most.
func TestQueueLengthCheckedBeforeAllocating(t *testing.T) {
	dir := t.TempDir()
	segs := fill(t, dir, 3000, 4<<20)
	b, _ := os.ReadFile(segs[0])
	for i, off := 0, 0; off+frameHeader <= len(b); i++ {
		_, _, n, err := ParseFrame(b[off:])
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			binary.BigEndian.PutUint32(b[off:], 0xffffff00)
		}
		off += n
	}
	os.WriteFile(segs[0], b, 0o640)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q, rep, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	seqs := drain(t, q, 0)
	runtime.ReadMemStats(&after)
	q.Close()
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Errorf("opening and reading allocated %d bytes", got)
	}
	if rep.Damaged == 0 || len(seqs) == 0 || len(seqs)+rep.Damaged > 3000 {
		t.Errorf("report %+v, %d records", rep, len(seqs))
	}
	t.Logf("%d frames with a length of 0xffffff00: %d damaged stretches, %d records read, %d bytes allocated",
		len(missing(seqs, 3000)), rep.Damaged, len(seqs), after.TotalAlloc-before.TotalAlloc)

	// The same damage written while the queue is open: the reader meets it.
	dir = t.TempDir()
	q, _, err = OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for seq := uint64(1); seq <= 3000; seq++ {
		q.Append(seq, payloadOf(seq))
	}
	q.Sync()
	segs, _ = filepath.Glob(filepath.Join(dir, "*.seg"))
	os.WriteFile(segs[0], b, 0o640) // same bytes, same inode: written in place
	runtime.GC()
	runtime.ReadMemStats(&before)
	seqs = drain(t, q, 0)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Errorf("reading allocated %d bytes", got)
	}
	if len(seqs) != 1500 || q.Stats().Damaged != 1500 {
		t.Errorf("read %d records, stats %+v", len(seqs), q.Stats())
	}
}

// TestQueueRefusesTooLarge: a record longer than a frame may carry is
// refused (ErrTooLarge), not written as a frame the reader would take for
// damage.
func TestQueueRefusesTooLarge(t *testing.T) {
	q, _, err := OpenQueue(QueueOptions{Dir: t.TempDir(), MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Append(1, make([]byte, MaxPayload+1)); err == nil || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v", err)
	}
	q.Append(2, payloadOf(2))
	if seqs := drain(t, q, 0); !slices.Equal(seqs, []uint64{2}) {
		t.Fatalf("read %v", seqs)
	}
}
