package preprocess

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// batchCase is one frame of a parity batch.
type batchCase struct {
	f     sensors.Format
	entry int
	seed  uint64
}

// A batch of cameras of different sizes and formats through RunBatch
// (one launch per format) writes each entry of the batched tensor exactly
// what Run writes for that frame alone, and within the parity tolerance of
// the CPU reference; entries no frame names keep their bytes. Every way a
// frame reaches the GPU (copy, mapped read, managed under strict rules).
func TestGPUBatchParity(t *testing.T) {
	for _, lane := range gpuLanes {
		t.Run(lane.name, func(t *testing.T) {
			batchParity(t, gpuPlacement(t, lane.o), lane.read, nil, true)
		})
	}
}

// batchParityFrames are the frames of a parity batch: landscape frames
// (bands above and below the image), a portrait one (bands left and
// right), a padded stride, three pixel formats.
var batchParityFrames = []batchCase{
	{sensors.Format{Width: 322, Height: 242, Pixel: sensors.YUYV}, 3, 11},
	{sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}, 0, 12},
	{sensors.Format{Width: 640, Height: 480, Pixel: sensors.NV12}, 4, 13},
	{sensors.Format{Width: 100, Height: 60, Pixel: sensors.YUYV, Stride: 236}, 1, 14},
	{sensors.Format{Width: 200, Height: 120, Pixel: sensors.RGB24}, 6, 15},
	{sensors.Format{Width: 120, Height: 200, Pixel: sensors.YUYV}, 7, 16},
}

// batchParityOptions are the tensors of a parity batch: planar and
// interleaved, fp16 and fp32, three channels and one, widths a multiple of
// 8, of 4 only and odd (the kernels' vector stores and their fallbacks).
var batchParityOptions = []Options{
	{Resize: Letterbox, Out: Output{C: 3, H: 160, W: 160, Half: true}},
	{Filter: Area, Matrix: BT709, FullRange: true, BGR: true, Scale: 1.0 / 255,
		Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}, Out: Output{C: 3, H: 96, W: 128, NHWC: true}},
	{Resize: Letterbox, Filter: Area, Out: Output{C: 1, H: 64, W: 80}},
	{Resize: Letterbox, Out: Output{C: 1, H: 61, W: 83}},
	{Resize: Letterbox, BGR: true, Scale: 1.0 / 255, Out: Output{C: 3, H: 72, W: 100, Half: true}},
	{Resize: Letterbox, Out: Output{C: 3, H: 64, W: 64, NHWC: true, Half: true}},
}

// batchParity runs the parity batch through RunBatch for every option,
// with the batch kernels of test in place of the product's where test
// names them (options with the area filter only for kernels that have
// the area code), and compares each entry with what Run writes for the
// frame alone, and with the CPU reference when withRef is set.
func batchParity(t *testing.T, p *umem.Placement, read string, test map[sensors.PixelFormat]batchVariantKernel, withRef bool) {
	frames := batchParityFrames
	const entries = 8 // 2 and 5 are named by no frame
	maxFrame := 1920 * 1080 * 2
	pool, err := umem.NewPool(p.Alloc, len(frames)+1, maxFrame)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, o := range batchParityOptions {
		g := newGPU(t, p, o, maxFrame, read)
		for pf, v := range test {
			if v.area || o.Filter != Area {
				if g.batchTest == nil {
					g.batchTest = map[sensors.PixelFormat]batchKernel{}
				}
				g.batchTest[pf] = v.batchKernel
			}
		}
		if test != nil && g.batchTest == nil {
			continue
		}
		per := o.Out.Bytes()
		batched, err := p.Alloc.Alloc(entries * per)
		if err != nil {
			t.Fatal(err)
		}
		defer batched.Release()
		single, err := p.Alloc.Alloc(per)
		if err != nil {
			t.Fatal(err)
		}
		defer single.Release()
		h, err := batched.Host()
		if err != nil {
			t.Fatal(err)
		}
		for i := range h[:entries*per] {
			h[i] = byte(i*7 + 1)
		}
		sentinel := bytes.Clone(h[:entries*per])
		var bf []BatchFrame
		var srcs [][]byte
		var slots []*umem.Slot
		for _, c := range frames {
			src := frameBytes(c.f, true, c.seed)
			slot, ok := pool.TryGet()
			if !ok {
				t.Fatal("no free slot")
			}
			slots = append(slots, slot)
			sh, err := slot.Buffer().Host()
			if err != nil {
				t.Fatal(err)
			}
			copy(sh, src)
			srcs = append(srcs, src)
			bf = append(bf, BatchFrame{Src: slot.Buffer(), N: len(src), Format: c.f, Entry: c.entry})
		}
		trs := make([]Transform, len(bf))
		if err := g.RunBatch(bf, batched, trs); err != nil {
			t.Fatalf("%s: RunBatch: %v", o.Out, err)
		}
		got, err := batched.Host()
		if err != nil {
			t.Fatalf("tensor not the host's after RunBatch: %v", err)
		}
		named := map[int]bool{}
		for i, c := range frames {
			named[c.entry] = true
			name := fmt.Sprintf("%s/%s/%s-%dx%d-entry%d", o.Out, o.Filter, c.f.Pixel, c.f.Width, c.f.Height, c.entry)
			tr, err := g.Run(bf[i].Src, bf[i].N, c.f, single)
			if err != nil {
				t.Fatalf("%s: Run: %v", name, err)
			}
			if trs[i] != tr {
				t.Errorf("%s: transform %+v, Run's %+v", name, trs[i], tr)
			}
			one, err := single.Host()
			if err != nil {
				t.Fatal(err)
			}
			entry := got[c.entry*per : (c.entry+1)*per]
			if k := firstDiff(entry, one[:per]); k >= 0 {
				t.Errorf("%s: the batched entry differs from the frame run alone at byte %d of %d", name, k, per)
			}
			if withRef {
				want := make([]byte, per)
				if _, err := reference(srcs[i], c.f, o, want); err != nil {
					t.Fatal(err)
				}
				compare(t, name, tensorValues(entry, o.Out), tensorValues(want, o.Out), o.Out)
			}
		}
		for e := 0; e < entries; e++ {
			if !named[e] && !bytes.Equal(got[e*per:(e+1)*per], sentinel[e*per:(e+1)*per]) {
				t.Errorf("%s: entry %d, named by no frame, was written", o.Out, e)
			}
		}
		for _, s := range slots {
			s.Release()
		}
	}
}

// firstDiff is the first byte where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// A batch of eight frames allocates nothing on the Go heap.
func TestGPURunBatchAllocatesNothing(t *testing.T) {
	for _, lane := range gpuLanes {
		t.Run(lane.name, func(t *testing.T) {
			p := gpuPlacement(t, lane.o)
			f := sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}
			o := Options{Resize: Letterbox, Out: Output{C: 3, H: 320, W: 320, Half: true}}
			g := newGPU(t, p, o, f.FrameSize(), lane.read)
			const n = 8
			pool, err := umem.NewPool(p.Alloc, n, f.FrameSize())
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			tensor, err := p.Alloc.Alloc(n * o.Out.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			defer tensor.Release()
			var slots [n]*umem.Slot
			frames := make([]BatchFrame, n)
			trs := make([]Transform, n)
			run := func() {
				for i := range frames {
					s, ok := pool.TryGet()
					if !ok {
						t.Fatal("no free slot")
					}
					slots[i] = s
					frames[i] = BatchFrame{Src: s.Buffer(), N: f.FrameSize(), Format: f, Entry: n - 1 - i}
				}
				if err := g.RunBatch(frames, tensor, trs); err != nil {
					t.Fatal(err)
				}
				for _, s := range slots {
					s.Release()
				}
			}
			run()
			if a := testing.AllocsPerRun(50, run); a != 0 {
				t.Errorf("%v allocations per batch, want 0", a)
			}
		})
	}
}

// Errors name the frame and leave the buffers usable.
func TestGPURunBatchErrors(t *testing.T) {
	p := gpuPlacement(t, umem.Options{Strategy: umem.StrategyPinned})
	o := Options{Out: Output{C: 3, H: 32, W: 32}}
	g := newGPU(t, p, o, 1<<20, "")
	src, _ := p.Alloc.Alloc(1 << 20)
	defer src.Release()
	src2, _ := p.Alloc.Alloc(1 << 20)
	defer src2.Release()
	tensor, _ := p.Alloc.Alloc(2 * o.Out.Bytes())
	defer tensor.Release()
	f := sensors.Format{Width: 64, Height: 48, Pixel: sensors.YUYV}
	trs := make([]Transform, 2)
	ok := BatchFrame{Src: src, N: f.FrameSize(), Format: f}
	for _, c := range []struct {
		name string
		bad  BatchFrame
	}{
		{"short frame", BatchFrame{Src: src2, N: 100, Format: f, Entry: 1}},
		{"entry beyond the tensor", BatchFrame{Src: src2, N: f.FrameSize(), Format: f, Entry: 2}},
		{"MJPEG", BatchFrame{Src: src2, N: f.FrameSize(), Format: sensors.Format{Width: 64, Height: 48, Pixel: sensors.MJPEG}, Entry: 1}},
		{"the same buffer twice", BatchFrame{Src: src, N: f.FrameSize(), Format: f, Entry: 1}},
	} {
		err := g.RunBatch([]BatchFrame{ok, c.bad}, tensor, trs)
		if err == nil {
			t.Errorf("%s: no error", c.name)
		} else if c.name == "MJPEG" && !errors.Is(err, ErrUnsupported) {
			t.Errorf("MJPEG: %v, want ErrUnsupported", err)
		}
	}
	ok2 := ok
	ok2.Src, ok2.Entry = src2, 1
	if err := g.RunBatch([]BatchFrame{ok, ok2}, tensor, trs); err != nil {
		t.Errorf("after the errors: %v", err)
	}
	if _, err := tensor.Host(); err != nil {
		t.Errorf("tensor after RunBatch: %v", err)
	}
}

// BenchmarkGPUBatchKernel times one launch of the batch kernel converting
// eight 4K YUYV frames (device memory) into an 8×3×640×640 fp16 tensor,
// against the device's copy roofline measured in the same run (the bytes
// all eight frames need at the bandwidth of a 256 MiB device copy:
// "of-roofline", goal ≥ 0.5), and the same eight frames as eight launches
// of the one-frame kernel ("8-launches-of-roofline"), timed the same way;
// "launch-floor-µs" is an empty kernel of the same grid. Then the same for
// each launch shape of batchVariants (sub-benchmarks named after them):
//
//	EDGED_REQUIRE_GPU=1 go test -run '^$' -bench GPUBatchKernel ./runtime/preprocess/
func BenchmarkGPUBatchKernel(b *testing.B) {
	p := gpuPlacement(b, umem.Options{Strategy: umem.StrategyPinned})
	gt := newGPUTimer(b, p.Device)
	const n = 8
	f := sensors.Format{Width: 3840, Height: 2160, Pixel: sensors.YUYV}
	variants := loadBatchVariants(b, newGPU(b, p, Options{Out: Output{C: 3, H: 32, W: 32}}, 0, ReadCopy))
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"8x4K-YUYV-to-8x3x640x640-fp16-letterbox", Options{Resize: Letterbox, Out: Output{C: 3, H: 640, W: 640, Half: true}}},
		{"8x4K-YUYV-to-8x3x640x640-fp16-letterbox-area", Options{Resize: Letterbox, Filter: Area, Out: Output{C: 3, H: 640, W: 640, Half: true}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := newGPU(b, p, c.o, f.FrameSize(), ReadCopy)
			d := p.Device
			var srcs [n]*umem.Mem
			for i := range srcs {
				m, err := d.Alloc(f.FrameSize(), umem.MemOptions{Kind: umem.KindDevice})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Release()
				srcs[i] = m
			}
			dst, err := d.Alloc(n*c.o.Out.Bytes(), umem.MemOptions{Kind: umem.KindDevice})
			if err != nil {
				b.Fatal(err)
			}
			defer dst.Release()
			if err := g.grow(n); err != nil {
				b.Fatal(err)
			}
			table, err := g.bat.host.Host()
			if err != nil {
				b.Fatal(err)
			}
			geo := g.batchGeometry(f)
			for i := range srcs {
				g.putDesc(table[i*descBytes:(i+1)*descBytes], srcs[i].Device(), &BatchFrame{Format: f, Entry: i}, &geo)
			}
			g.stream, gt.s = gt.s, g.stream
			defer func() { g.stream, gt.s = gt.s, g.stream }()
			if err := g.stream.Copy(g.bat.dev, g.bat.host, n*descBytes); err != nil {
				b.Fatal(err)
			}
			need := n * bytesNeeded(f, c.o)
			roof := float64(need) / gt.bw
			sms := d.Probe().Multiprocs
			// one times bk's launch over the eight frames and reports it.
			one := func(b *testing.B, bk batchKernel) {
				blocks := bk.shape.blocks(c.o.Out, &geo)
				batch := func() error { return g.launchBatch(bk, g.bat.dev.Device(), n, blocks, dst.Device()) }
				if err := batch(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				kernel := gt.timed(b, g.stream, 50, batch)
				grid, block := bk.shape.grid(c.o.Out, blocks, n, sms)
				floor := gt.timed(b, g.stream, 50, func() error { return gt.empty.Launch(g.stream, grid, block, 0, &gt.none) })
				b.ReportMetric(kernel*1e6, "batch-kernel-µs")
				b.ReportMetric(float64(need)/1e6, "MB-needed")
				b.ReportMetric(gt.bw/1e9, "copy-GB/s")
				b.ReportMetric(roof/kernel, "of-roofline")
				b.ReportMetric(floor*1e6, "launch-floor-µs")
				b.ReportMetric(float64(grid.X*grid.Y*grid.Z), "blocks")
			}
			b.Run("product", func(b *testing.B) {
				one(b, g.batchKernel(f.Pixel))
				g.plan(f)
				fn := g.kernel(f.Pixel)
				per := c.o.Out.Bytes()
				eight := func() error {
					for i := range srcs {
						if err := g.launch(fn, f, srcs[i].Device(), dst.Device()+uintptr(i*per)); err != nil {
							return err
						}
					}
					return nil
				}
				launches := gt.timed(b, g.stream, 50, eight)
				b.ReportMetric(launches*1e6, "8-launches-µs")
				b.ReportMetric(roof/launches, "8-launches-of-roofline")
			})
			if c.o.Filter != Area {
				// The kernel of the area filter (and of every batch before
				// the tiles), one pixel a thread.
				b.Run("one-pixel-a-thread", func(b *testing.B) { one(b, batchKernel{fn: g.k.area[f.Pixel]}) })
			}
			for _, v := range variants {
				if c.o.Filter == Area && !v.area {
					continue
				}
				b.Run(v.name, func(b *testing.B) { one(b, v.batchKernel) })
			}
		})
	}
}

// With EDGED_PROFILE_BATCH=1, each batch kernel (product and variants)
// converts eight 4K YUYV frames once, bilinear and area: for a profiler
// (ncu --kernel-name regex:edged_) to see each launch once.
func TestGPUBatchVariantsProfile(t *testing.T) {
	if os.Getenv("EDGED_PROFILE_BATCH") != "1" {
		t.Skip("set EDGED_PROFILE_BATCH=1 to run (under a profiler)")
	}
	p := gpuPlacement(t, umem.Options{Strategy: umem.StrategyPinned})
	const n = 8
	f := sensors.Format{Width: 3840, Height: 2160, Pixel: sensors.YUYV}
	variants := loadBatchVariants(t, newGPU(t, p, Options{Out: Output{C: 3, H: 32, W: 32}}, 0, ReadCopy))
	for _, filter := range []string{Bilinear, Area} {
		o := Options{Resize: Letterbox, Filter: filter, Out: Output{C: 3, H: 640, W: 640, Half: true}}
		g := newGPU(t, p, o, f.FrameSize(), ReadCopy)
		d := p.Device
		var srcs [n]*umem.Mem
		for i := range srcs {
			m, err := d.Alloc(f.FrameSize(), umem.MemOptions{Kind: umem.KindDevice})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			srcs[i] = m
		}
		dst, err := d.Alloc(n*o.Out.Bytes(), umem.MemOptions{Kind: umem.KindDevice})
		if err != nil {
			t.Fatal(err)
		}
		defer dst.Release()
		if err := g.grow(n); err != nil {
			t.Fatal(err)
		}
		table, _ := g.bat.host.Host()
		geo := g.batchGeometry(f)
		for i := range srcs {
			g.putDesc(table[i*descBytes:(i+1)*descBytes], srcs[i].Device(), &BatchFrame{Format: f, Entry: i}, &geo)
		}
		if err := g.stream.Copy(g.bat.dev, g.bat.host, n*descBytes); err != nil {
			t.Fatal(err)
		}
		bks := []batchKernel{g.batchKernel(f.Pixel), {fn: g.k.area[f.Pixel]}}
		for _, v := range variants {
			if v.area || filter != Area {
				bks = append(bks, v.batchKernel)
			}
		}
		for _, bk := range bks {
			if err := g.launchBatch(bk, g.bat.dev.Device(), n, bk.shape.blocks(o.Out, &geo), dst.Device()); err != nil {
				t.Fatal(err)
			}
			if err := g.stream.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Closing a GPU whose batch state has places no frame was copied into (the
// in-place read modes have no uploaders; a smaller batch leaves later
// places unused) releases what there is. No GPU needed.
func TestBatchStateCloseWithUnusedPlaces(t *testing.T) {
	s := &batchState{ups: make([]*umem.Uploader, 3), upCap: make([]int, 3), attached: make([]*umem.Mem, 3), geo: make([]Geometry, 3)}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
