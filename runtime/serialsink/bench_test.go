package serialsink

import (
	"io"
	"testing"

	"github.com/creack/pty"

	"github.com/edged-dev/edged/runtime/stream/streamtest"
)

// BenchmarkSerialPublish: Publish into the serial sink (encoding, CRC,
// COBS, queue); the port is a pty drained by a reader.
func BenchmarkSerialPublish(b *testing.B) {
	m, sl, err := pty.Open()
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	defer sl.Close()
	go io.Copy(io.Discard, m)
	s, err := New(Options{Device: sl.Name(), Baud: 921600})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := streamtest.BenchRecord()
	b.ReportAllocs()
	for b.Loop() {
		r.FrameSeq++
		s.Publish(r)
	}
}
