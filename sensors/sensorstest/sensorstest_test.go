package sensorstest

import (
	"context"
	"errors"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

func TestScriptedSource(t *testing.T) {
	s := NewSource("cam", sensors.Format{Width: 2, Height: 2, Pixel: sensors.GREY})
	s.Strict = true
	pool := NewHeapPool(2, 4)
	s.FailStart(sensors.ErrNotFound)
	if err := s.Start(context.Background(), pool); !errors.Is(err, sensors.ErrNotFound) {
		t.Fatalf("first Start: %v", err)
	}
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	s.Push(Step{Data: []byte{1, 2, 3, 4}, TCapture: 42}, Step{Data: []byte{5}, SeqSkip: 2}, Step{Err: sensors.ErrDeviceGone})
	f, err := s.Next(context.Background())
	if err != nil || f.Seq != 0 || f.TCapture != 42 || f.Data()[3] != 4 {
		t.Fatalf("frame %+v, %v", f, err)
	}
	f.Slot.Release()
	f, err = s.Next(context.Background())
	if err != nil || f.Seq != 3 || f.BytesUsed != 1 {
		t.Fatalf("frame %+v, %v", f, err)
	}
	f.Slot.Release()
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrDeviceGone) {
		t.Fatalf("scripted error: %v", err)
	}
	// Next waits for more script: the source contract holds.
	CheckSource(t, SourceCase{Source: s, Pool: pool})
	s.Start(context.Background(), pool)
	s.Push(Step{})
	if err := s.Close(); err == nil {
		t.Fatal("strict Close with unplayed steps did not fail")
	}
	if pool.Leased() != 0 || len(pool.Misuses()) != 0 {
		t.Fatalf("pool: %d leased, misuses %v", pool.Leased(), pool.Misuses())
	}
}

func TestPoolCatchesDoubleRelease(t *testing.T) {
	p := NewHeapPool(1, 8)
	s, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.TryGet(); ok {
		t.Fatal("TryGet on an empty pool succeeded")
	}
	s.Release()
	s.Release()
	if len(p.Misuses()) != 1 || p.Leased() != 0 {
		t.Fatalf("misuses %v leased %d", p.Misuses(), p.Leased())
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, _ := p.Get(ctx)
	cancel()
	if _, err := p.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get on an exhausted pool with a cancelled ctx: %v", err)
	}
	a.Release()
	m, err := NewMmapPool(2, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Slot(0).Addr()%4096 != 0 {
		t.Fatal("mmap slot not page-aligned")
	}
}

func TestScriptedSampleSource(t *testing.T) {
	s := NewSampleSource("imu")
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Push(sensors.Sample{Kind: "imu", TMono: 7}, sensors.Sample{Kind: "imu"})
	s.PushErr(sensors.ErrDeviceGone)
	a, _ := s.Next(context.Background())
	b, _ := s.Next(context.Background())
	if a.Sensor != "imu" || a.Seq != 0 || a.TMono != 7 || b.Seq != 1 || b.TMono == 0 {
		t.Fatalf("samples %+v %+v", a, b)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrDeviceGone) {
		t.Fatal(err)
	}
	CheckSampleSource(t, s)
}
