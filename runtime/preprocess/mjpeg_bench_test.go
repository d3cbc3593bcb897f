package preprocess

import (
	"bytes"
	"image"
	stdjpeg "image/jpeg"
	"os"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/umem"
)

// cameraJPEG is a 1080p quality-85 frame of a natural-looking scene
// (gradients, flat shapes, a little sensor noise), as an MJPEG camera
// sends it.
func cameraJPEG(tb testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	var s uint32 = 7
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := [3]int{40 + 180*x/w, 30 + 200*y/h, 200 - 150*(x+y)/(w+h)}
			if dx, dy := x-w/3, y-h/2; dx*dx+dy*dy < (h/5)*(h/5) {
				c = [3]int{230, 40, 50}
			}
			if x > w*3/5 && x < w*4/5 && y > h/5 && y < h*4/5 {
				c = [3]int{250, 250, 245}
			}
			o := 4 * (y*w + x)
			for k := range 3 {
				s = s*1664525 + 1013904223
				img.Pix[o+k] = uint8(min(max(c[k]+int(s>>29)-3, 0), 255))
			}
			img.Pix[o+3] = 255
		}
	}
	var b bytes.Buffer
	if err := stdjpeg.Encode(&b, img, &stdjpeg.Options{Quality: 85}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkMJPEGToTensor: one 1080p MJPEG frame to a 3x224x224 ImageNet
// tensor, the whole way: image/jpeg's decode plus the CPU path (what
// edged did before libjpeg-turbo and nvJPEG), libjpeg-turbo at the scale
// the input needs plus the CPU path, and nvJPEG writing into a pinned
// frame slot plus the GPU path reading that slot in place (the daemon's
// way on a CUDA machine). docs/PERFORMANCE.md has the ratios of one run:
//
//	go test -run '^$' -bench MJPEGToTensor -benchmem ./runtime/preprocess/
func BenchmarkMJPEGToTensor(b *testing.B) {
	const w, h = 1920, 1080
	src := cameraJPEG(b, w, h)
	o := Options{Mean: imageNet.mean, Std: imageNet.std, Out: Output{C: 3, H: 224, W: 224}}
	tensor := make([]byte, o.Out.Bytes())
	rgb := make([]byte, 3*w*h)
	cpu, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	defer cpu.Close()
	for _, c := range []struct {
		name  string
		opts  jpeg.Options
		denom int
	}{
		{"image-jpeg+cpu", jpeg.Options{Backend: jpeg.Std}, 1},
		{"libjpeg-turbo-scaled+cpu", jpeg.Options{Backend: jpeg.TurboJPEG}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := jpeg.New(c.opts)
			if err != nil {
				b.Skip(err)
			}
			defer d.Close()
			den := c.denom
			if den == 0 {
				den, _ = jpeg.ChooseScale(w, h, 224, 224, jpeg.Stretch)
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				dw, dh, err := d.Decode(rgb, src, den)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cpu.Run(rgb[:3*dw*dh], sensors.Format{Width: dw, Height: dh, Pixel: sensors.RGB24}, tensor); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("nvjpeg+gpu", func(b *testing.B) {
		p := gpuPlacement(b, umem.Options{Strategy: umem.StrategyPinned})
		f := sensors.Format{Width: w, Height: h, Pixel: sensors.RGB24}
		g := newGPU(b, p, o, f.FrameSize(), ReadInPlace)
		d, err := jpeg.New(jpeg.Options{Backend: jpeg.NVJPEG, GPU: &jpeg.GPU{Direct: true}})
		if err != nil {
			if os.Getenv("EDGED_REQUIRE_NVJPEG") != "" {
				b.Fatal(err)
			}
			b.Skip(err)
		}
		defer d.Close()
		pool, err := umem.NewPool(p.Alloc, 1, f.FrameSize())
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		out, err := p.Alloc.Alloc(o.Out.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		defer out.Release()
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		for b.Loop() {
			slot, _ := pool.TryGet()
			host, err := slot.Buffer().Host()
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := d.Decode(host, src, 1); err != nil {
				b.Fatal(err)
			}
			if _, err := g.Run(slot.Buffer(), f.FrameSize(), f, out); err != nil {
				b.Fatal(err)
			}
			slot.Release()
		}
	})
}
