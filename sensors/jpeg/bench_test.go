package jpeg_test

import (
	"bytes"
	"fmt"
	stdjpeg "image/jpeg"
	"sync"
	"testing"

	"github.com/edged-dev/edged/sensors/jpeg"
)

// BenchmarkDecode1080p decodes one 1920x1080 4:2:0 q85 frame of scene
// (image/jpeg encoded): full scale on both backends (and image/jpeg's
// decode to YCbCr alone, without the RGB24 conversion), and libjpeg-turbo at
// the scale a 224x224 stretch input needs (1/4, 480x270). docs/PERFORMANCE.md
// ("MJPEG decoding") has the numbers.
func BenchmarkDecode1080p(b *testing.B) {
	src := encode(b, scene(1920, 1080), 85)
	dst := make([]byte, 1920*1080*3)
	den224, _ := jpeg.ChooseScale(1920, 1080, 224, 224, jpeg.Stretch)
	b.Run("image-jpeg/ycbcr-only", func(b *testing.B) { // jpeg.Decode alone, no RGB24 conversion
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stdjpeg.Decode(bytes.NewReader(src)); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name  string
		mk    func(testing.TB) *jpeg.Decoder
		denom int
	}{
		{"image-jpeg/full", std, 1},
		{"libjpeg-turbo/full", turbo, 1},
		{"libjpeg-turbo/224-stretch", turbo, den224},
		{"libjpeg-turbo/1-8", turbo, 8},
		{"nvjpeg/full-copied", nvjpeg, 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := c.mk(b)
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := d.Decode(dst, src, c.denom); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNVJPEG1080p: nvJPEG decoding 1080p frames straight into CUDA
// managed memory (what the daemon's slots are), one camera, and four
// cameras at once sharing the engine (batches). ns/op is per frame; the
// frames/s metric is the aggregate rate. docs/PERFORMANCE.md has the
// numbers of the GPU machine.
func BenchmarkNVJPEG1080p(b *testing.B) {
	src := encode(b, scene(1920, 1080), 85)
	for _, cams := range []int{1, 4} {
		b.Run(fmt.Sprintf("direct/%dcam", cams), func(b *testing.B) {
			decs := make([]*jpeg.Decoder, cams)
			dsts := make([][]byte, cams)
			for i := range decs {
				decs[i] = nvjpegWith(b, jpeg.GPU{Direct: true})
				m, free := jpeg.AllocManaged(decs[i], 1920*1080*3)
				if m == nil {
					b.Fatal("no managed memory")
				}
				b.Cleanup(free)
				dsts[i] = m
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range decs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := i; n < b.N; n += cams {
						if _, _, err := decs[i].Decode(dsts[i], src, 1); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
