package serialsrc

import (
	"bytes"
	"context"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// BenchmarkParse is the cost of the pure parsers per record.
func BenchmarkParse(b *testing.B) {
	var s sensors.Sample
	gga := []byte("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47")
	csv := []byte("0.01,-9.81,0.5,0.001,0.002,0.003")
	names := []string{"ax", "ay", "az", "gx", "gy", "gz"}
	pkt := AppendPacket(nil, []float32{1, 2, 3, 4, 5, 6})
	frame := pkt[:len(pkt)-1]
	scratch := make([]byte, 256)
	b.Run("nmea-gga", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParseNMEA(gga, &s)
		}
	})
	b.Run("csv-6", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParseCSV(csv, names, &s)
		}
	})
	b.Run("cobs-6", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParsePacket(frame, scratch, names, &s)
		}
	})
}

// BenchmarkPTY is one CSV IMU sample end to end through a real pty:
// master write, go.bug.st/serial read, framing, parsing, queue, Next.
// Allocations here come from go.bug.st/serial's Read (its select set), per
// read call, not per sample.
func BenchmarkPTY(b *testing.B) {
	p := newTTYB(b)
	s, err := New(Options{Name: "imu", Device: p.slave.Name(), Protocol: CSV, Columns: []string{"ax", "ay", "az", "gx", "gy", "gz"}, Queue: 4096})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	block := bytes.Repeat([]byte("0.01,-9.81,0.5,0.001,0.002,0.003\n"), 64)
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%64 == 0 {
			if _, err := p.master.Write(block); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Next(ctx); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
