package trt_test

import (
	"context"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/trttest"
)

func installFake(tb testing.TB, hot *trt.Hot, value float32) *trttest.Backend {
	be := trttest.NewBackend()
	e, err := be.Load(context.Background(), trttest.Spec{Value: value}.Bytes(), trt.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	hot.Install(e, "bench", [32]byte{1})
	return be
}

func TestHotAcquireReleaseAllocatesNothing(t *testing.T) {
	hot := &trt.Hot{}
	installFake(t, hot, 1)
	defer hot.Close()
	if n := testing.AllocsPerRun(1000, func() {
		g := hot.Acquire()
		g.Release()
	}); n != 0 {
		t.Fatalf("Acquire+Release allocates %v times", n)
	}
}

func BenchmarkHotAcquireRelease(b *testing.B) {
	hot := &trt.Hot{}
	installFake(b, hot, 1)
	defer hot.Close()
	b.ReportAllocs()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g := hot.Acquire()
			g.Release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				g := hot.Acquire()
				g.Release()
			}
		})
	})
}
