package mqttsink

import (
	"bytes"
	"errors"
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
