package sensors_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

func ringOf(capacity int, times ...int64) *sensors.Ring {
	r := sensors.NewRing(capacity)
	for i, t := range times {
		r.Push(sensors.Sample{Seq: uint64(i), TMono: t})
	}
	return r
}

func TestRingNearest(t *testing.T) {
	r := ringOf(8, 100, 200, 300, 400)
	for _, c := range []struct {
		t, window int64
		want      int64 // TMono of the result, -1 for none
	}{
		{250, 1000, 200}, // tie: earlier wins
		{260, 1000, 300},
		{240, 1000, 200},
		{100, 0, 100},
		{50, 49, -1},
		{50, 50, 100},
		{450, 50, 400},
		{451, 50, -1},
		{0, 1 << 40, 100},
		{1 << 40, 1 << 41, 400},
	} {
		got := r.Nearest(c.t, c.window, nil)
		if c.want < 0 {
			if len(got) != 0 {
				t.Errorf("Nearest(%d, ±%d) = %d, want none", c.t, c.window, got[0].TMono)
			}
			continue
		}
		if len(got) != 1 || got[0].TMono != c.want {
			t.Errorf("Nearest(%d, ±%d) = %v, want TMono %d", c.t, c.window, got, c.want)
		}
	}
	if got := sensors.NewRing(4).Nearest(5, 100, nil); len(got) != 0 {
		t.Errorf("empty ring returned %v", got)
	}
}

func TestRingWrapsAndRefusesOld(t *testing.T) {
	r := ringOf(3, 10, 20, 30, 40, 50)
	if r.Len() != 3 {
		t.Fatalf("Len %d, want 3", r.Len())
	}
	if got := r.Nearest(10, 100, nil); got[0].TMono != 30 {
		t.Fatalf("oldest kept sample %d, want 30 after wrap", got[0].TMono)
	}
	if r.Push(sensors.Sample{TMono: 45}) {
		t.Fatal("accepted a sample older than the newest")
	}
	got := r.Between(30, 50, nil)
	if len(got) != 3 || got[0].TMono != 30 || got[2].TMono != 50 {
		t.Fatalf("Between(30,50) = %v", got)
	}
	if got := r.Between(31, 39, nil); len(got) != 0 {
		t.Fatalf("Between(31,39) = %v, want none", got)
	}
}

func TestRingMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := sensors.NewRing(50)
	var all []int64
	var tm int64
	for i := 0; i < 500; i++ {
		tm += rng.Int64N(20)
		r.Push(sensors.Sample{TMono: tm})
		all = append(all, tm)
		kept := all[max(0, len(all)-50):]
		q, w := rng.Int64N(tm+50), rng.Int64N(30)
		want, wd := int64(-1), int64(-1)
		for _, v := range kept {
			d := v - q
			if d < 0 {
				d = -d
			}
			if d <= w && (wd < 0 || d < wd) {
				want, wd = v, d
			}
		}
		got := r.Nearest(q, w, nil)
		if (want < 0) != (len(got) == 0) || (want >= 0 && got[0].TMono != want) {
			t.Fatalf("step %d: Nearest(%d,±%d) = %v, linear scan says %d", i, q, w, got, want)
		}
	}
}

func TestRingNoAllocs(t *testing.T) {
	r := ringOf(64, 1, 2, 3, 4, 5, 6, 7, 8)
	dst := make([]sensors.Sample, 0, 4)
	if n := sensorstest.Mallocs(100, func() {
		dst = r.Nearest(4, 10, dst[:0])
		r.Push(sensors.Sample{TMono: 9})
	}); n != 0 {
		t.Fatalf("%v allocations in 100 Nearest+Push", n)
	}
}

func TestRingConcurrent(t *testing.T) {
	r := sensors.NewRing(16)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := int64(0); i < 5000; i++ {
			r.Push(sensors.Sample{TMono: i})
		}
	}()
	go func() {
		defer wg.Done()
		dst := make([]sensors.Sample, 0, 1)
		for i := int64(0); i < 5000; i++ {
			dst = r.Nearest(i, 3, dst[:0])
		}
	}()
	wg.Wait()
}

func BenchmarkRingNearest(b *testing.B) {
	r := sensors.NewRing(1024)
	for i := int64(0); i < 1024; i++ {
		r.Push(sensors.Sample{TMono: i * 1000})
	}
	dst := make([]sensors.Sample, 0, 1)
	b.ReportAllocs()
	var t int64
	for b.Loop() {
		dst = r.Nearest(t%1_024_000, 5000, dst[:0])
		t += 777
	}
}
