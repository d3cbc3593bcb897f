package mqttsink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzParseFrame: the disk-queue frame parser never panics, refuses with
// ErrCorrupt, and what it accepts encodes back to the same bytes.
func FuzzParseFrame(f *testing.F) {
	f.Add(AppendFrame(nil, 1, []byte(`{"type":"result"}`)))
	f.Add(AppendFrame(AppendFrame(nil, 7, nil), 8, []byte{0, 1, 2}))
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, payload, n, err := ParseFrame(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if n < frameHeader || n > len(b) {
			t.Fatalf("n = %d of %d", n, len(b))
		}
		if again := AppendFrame(nil, seq, payload); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoded % x, parsed % x", again, b[:n])
		}
	})
}

// FuzzQueueSegment: a segment file of any content opens and reads without
// a panic, and every record it yields is intact and in seq order; and in a
// segment of n records, one flipped byte anywhere costs exactly the record
// whose frame holds it (the reader resynchronises past it), the rest come
// back.
func FuzzQueueSegment(f *testing.F) {
	f.Add(uint8(40), uint32(300), byte(0x01), []byte(nil))
	f.Add(uint8(5), uint32(2), byte(0xff), AppendFrame(nil, 3, []byte("x")))
	f.Add(uint8(1), uint32(0), byte(0x80), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, n uint8, pos uint32, mask byte, junk []byte) {
		count := uint64(n%64) + 1
		var seg []byte
		var ends []int
		for seq := uint64(1); seq <= count; seq++ {
			seg = AppendFrame(seg, seq, payloadOf(seq))
			ends = append(ends, len(seg))
		}
		at := int(pos % uint32(len(seg)))
		hit := uint64(slices.IndexFunc(ends, func(e int) bool { return at < e })) + 1
		if mask != 0 {
			seg[at] ^= mask
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.seg", 1)), seg, 0o640)
		// Junk as a segment of its own, after: read, but nothing required of it.
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.seg", 1000)), junk, 0o640)
		q, _, err := OpenQueue(QueueOptions{Dir: dir, MaxBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		var got []uint64
		for after := uint64(0); ; {
			seq, p, ok, err := q.Next(after)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if seq <= after {
				t.Fatalf("seq %d after %d", seq, after)
			}
			if seq <= count && !bytes.Equal(p, payloadOf(seq)) {
				t.Fatalf("seq %d: payload %q", seq, p)
			}
			got = append(got, seq)
			after = seq
		}
		for seq := uint64(1); seq <= count; seq++ {
			want := mask == 0 || seq != hit
			if slices.Contains(got, seq) != want {
				t.Fatalf("%d records, byte %d (record %d) ^ %#x: seq %d came back %v; got %v", count, at, hit, mask, seq, !want, got)
			}
		}
	})
}
