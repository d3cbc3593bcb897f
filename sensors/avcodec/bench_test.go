//go:build cgo && linux

package avcodec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edged-dev/edged/sensors/h26x"
)

// benchStream is the H.264 stream the benchmarks decode: the committed
// 170x100 sample, or the Annex-B file $EDGED_AVCODEC_SAMPLE names
// (docs/PERFORMANCE.md: a 1080p30 High profile one at 4 Mb/s).
func benchStream(b *testing.B) [][]byte {
	if f := os.Getenv("EDGED_AVCODEC_SAMPLE"); f != "" {
		abs, err := filepath.Abs(f)
		if err != nil {
			b.Fatal(err)
		}
		return accessUnits(b, abs, h26x.H264)
	}
	return accessUnits(b, "h264_170x100.h264", h26x.H264)
}

// BenchmarkDecode: one access unit sent and its picture received (not
// written), one thread and libavcodec's choice.
func BenchmarkDecode(b *testing.B) {
	need(b)
	aus := benchStream(b)
	for _, threads := range []int{1, 0} {
		name := map[int]string{1: "threads=1", 0: "threads=auto"}[threads]
		b.Run(name, func(b *testing.B) {
			d, err := Open(h26x.H264, Options{Threads: threads})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				d.Send(aus[i%len(aus)], uint64(i))
				for {
					if _, _, ok, _ := d.Receive(); !ok {
						break
					}
				}
			}
		})
	}
}

// BenchmarkWriteNV12: one decoded picture copied into a slot as NV12 (the
// luma plane copied, the chroma planes interleaved), against the same
// bytes copied plane by plane (i420-copy): what the interleave costs over
// the copy any layout needs.
func BenchmarkWriteNV12(b *testing.B) {
	need(b)
	aus := benchStream(b)
	d, err := Open(h26x.H264, Options{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var buf []byte
	for i := 0; buf == nil; i++ {
		d.Send(aus[i], uint64(i))
		if _, f, ok, _ := d.Receive(); ok {
			buf = make([]byte, f.FrameSize())
		}
	}
	b.Run("nv12", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d.have = true
			if _, err := d.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The baseline: the same bytes copied plane by plane, no interleave.
	b.Run("i420-copy", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			d.writeI420(buf)
		}
	})
}
