package preprocess

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// GPU tests run wherever a CUDA driver, a device and NVRTC are found. They
// skip without them, unless EDGED_REQUIRE_GPU=1 makes that a failure.

func requireGPU() bool { return os.Getenv("EDGED_REQUIRE_GPU") == "1" }

var gpuCacheDir = func() string {
	dir, err := os.MkdirTemp("", "edged-pre-ptx-")
	if err != nil {
		panic(err)
	}
	return dir
}()

func gpuPlacement(t testing.TB, o umem.Options) *umem.Placement {
	t.Helper()
	p, err := umem.Open(o)
	if err == nil && p.Device == nil {
		err = fmt.Errorf("%w: %s", umem.ErrNoCUDA, p.Reason)
	}
	if err != nil {
		if errors.Is(err, umem.ErrNoCUDA) && !requireGPU() {
			t.Skipf("no CUDA (set EDGED_REQUIRE_GPU=1 to fail instead): %v", err)
		}
		t.Fatalf("umem.Open(%+v): %v", o, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newGPU(t testing.TB, p *umem.Placement, o Options, maxFrame int, read string) *GPU {
	t.Helper()
	g, err := NewGPU(o, GPUOptions{Placement: p, MaxFrameBytes: maxFrame, CacheDir: gpuCacheDir,
		NVRTC: os.Getenv("EDGED_NVRTC_LIB"), Read: read})
	if err != nil {
		if errors.Is(err, ErrNoGPU) && !requireGPU() {
			t.Skipf("no NVRTC (set EDGED_REQUIRE_GPU=1 to fail instead): %v", err)
		}
		t.Fatalf("NewGPU: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("GPU.Close: %v", err)
		}
	})
	return g
}

// gpuLane is one way frames reach the kernel: a memory strategy and a read
// mode.
type gpuLane struct {
	name string
	o    umem.Options
	read string
}

var gpuLanes = []gpuLane{
	{"pinned+copy", umem.Options{Strategy: umem.StrategyPinned}, ReadCopy},
	{"pinned+mapped-read", umem.Options{Strategy: umem.StrategyPinned}, ReadInPlace},
	{"managed+strict", umem.Options{Strategy: umem.StrategyManaged, Strict: true}, ""},
}

// frameInto fills a buffer with a noisy (seeded random) or flat frame.
func frameBytes(f sensors.Format, noisy bool, seed uint64) []byte {
	b := make([]byte, f.FrameSize())
	if noisy {
		r := rand.New(rand.NewPCG(seed, 7))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for i := range b {
		b[i] = []byte{90, 160, 70, 200}[i%4]
	}
	return b
}

// gpuCase is one parity case.
type gpuCase struct {
	pix       sensors.PixelFormat
	w, h      int
	stride    int
	o         Options
	noisy     bool
	seed      uint64
	tolerance float32
}

func (c gpuCase) String() string {
	o := c.o
	kind := "flat"
	if c.noisy {
		kind = "noisy"
	}
	return fmt.Sprintf("%s_%dx%d_s%d_%s_%s_%s_%s_full%v_bgr%v_%s", c.pix, c.w, c.h, c.stride, o.Resize, o.Filter, o.Matrix,
		kind, o.FullRange, o.BGR, o.Out)
}

func parityCases() []gpuCase {
	var cs []gpuCase
	outs := []Output{
		{C: 3, H: 96, W: 128},
		{C: 3, H: 96, W: 96, NHWC: true, Half: true},
		{C: 1, H: 64, W: 80},
	}
	pixes := []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.GREY, sensors.RGB24, sensors.BGR24}
	seed := uint64(1)
	for _, pix := range pixes {
		for _, resize := range []string{Stretch, Letterbox} {
			for _, filter := range []string{Bilinear, Area} {
				for oi, out := range outs {
					for _, noisy := range []bool{true, false} {
						o := Options{Resize: resize, Filter: filter, Out: out, Scale: 1.0 / 255,
							Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}}
						if oi == 1 {
							o.Matrix, o.FullRange, o.BGR = BT709, true, true
						}
						seed++
						cs = append(cs, gpuCase{pix: pix, w: 322, h: 242, o: o, noisy: noisy, seed: seed})
					}
				}
			}
		}
	}
	// Portrait sources: letterbox bands left and right of the image.
	for _, pix := range pixes {
		for _, filter := range []string{Bilinear, Area} {
			cs = append(cs, gpuCase{pix: pix, w: 120, h: 200, noisy: true, seed: 77,
				o: Options{Resize: Letterbox, Filter: filter, Out: Output{C: 3, H: 112, W: 144, NHWC: true}}})
		}
	}
	// Padded strides, an upscale, a large downscale.
	for _, pix := range pixes {
		f := sensors.Format{Width: 100, Height: 60, Pixel: pix}
		cs = append(cs, gpuCase{pix: pix, w: 100, h: 60, stride: f.Pixel.PackedLine(100) + 36, noisy: true, seed: 99,
			o: Options{Resize: Letterbox, Filter: Area, Out: Output{C: 3, H: 160, W: 224}}})
	}
	for _, filter := range []string{Bilinear, Area} {
		cs = append(cs, gpuCase{pix: sensors.YUYV, w: 1920, h: 1080, noisy: true, seed: 5,
			o: Options{Filter: filter, Out: Output{C: 3, H: 224, W: 224}, Scale: 1.0 / 255,
				Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}}})
		cs = append(cs, gpuCase{pix: sensors.NV12, w: 3840, h: 2160, noisy: true, seed: 6,
			o: Options{Resize: Letterbox, Filter: filter, Out: Output{C: 3, H: 640, W: 640, Half: true}}})
	}
	return cs
}

// tensorValues reads n output values as float32.
func tensorValues(b []byte, out Output) []float32 {
	n := out.C * out.H * out.W
	v := make([]float32, n)
	if out.Half {
		h := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
		for i := range v {
			v[i] = HalfToFloat(h[i])
		}
		return v
	}
	copy(v, unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n))
	return v
}

// compare checks got against the reference: fp32 within 1e-3; fp16
// within 1e-3 plus one fp16 step at the value (the fp32 values may fall on
// either side of a rounding boundary).
func compare(t *testing.T, name string, got, want []float32, out Output) {
	t.Helper()
	worst, at := float32(0), -1
	for i := range want {
		tol := float32(1e-3)
		if out.Half {
			tol += float32(math.Abs(float64(want[i]))) / 1024
		}
		d := float32(math.Abs(float64(got[i] - want[i])))
		if d > tol && d > worst || math.IsNaN(float64(got[i])) {
			worst, at = d, i
		}
	}
	if at >= 0 {
		t.Errorf("%s: element %d: GPU %g, reference %g (|d| = %g)", name, at, got[at], want[at], worst)
	}
}

// Every source format, resize, filter, colour matrix, range, channel
// order, layout and type: the fused kernel agrees with the CPU reference,
// through every way a frame reaches the GPU (strict mode included: the
// Jetson rules enforced on this device, managed slots read in place).
func TestGPUParity(t *testing.T) {
	cases := parityCases()
	for _, lane := range gpuLanes {
		t.Run(lane.name, func(t *testing.T) {
			p := gpuPlacement(t, lane.o)
			maxFrame := 3840 * 2160 * 2
			pool, err := umem.NewPool(p.Alloc, 1, maxFrame)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			tensor, err := p.Alloc.Alloc(640 * 640 * 3 * 4)
			if err != nil {
				t.Fatal(err)
			}
			defer tensor.Release()
			gpus := map[Options]*GPU{}
			for _, c := range cases {
				f := sensors.Format{Width: c.w, Height: c.h, Pixel: c.pix, Stride: c.stride}
				src := frameBytes(f, c.noisy, c.seed)
				want := make([]byte, c.o.Out.Bytes())
				if _, err := reference(src, f, c.o, want); err != nil {
					t.Fatalf("%s: reference: %v", c, err)
				}
				g := gpus[c.o]
				if g == nil {
					g = newGPU(t, p, c.o, maxFrame, lane.read)
					gpus[c.o] = g
				}
				slot, ok := pool.TryGet()
				if !ok {
					t.Fatal("no free slot")
				}
				h, err := slot.Buffer().Host()
				if err != nil {
					t.Fatal(err)
				}
				copy(h, src)
				tr, err := g.Run(slot.Buffer(), len(src), f, tensor)
				slot.Release()
				if err != nil {
					t.Fatalf("%s: Run: %v", c, err)
				}
				wantTr := Place(c.w, c.h, c.o.Out.W, c.o.Out.H, c.o.Resize).Transform
				if tr != wantTr {
					t.Errorf("%s: transform %+v, want %+v", c, tr, wantTr)
				}
				tb, err := tensor.Host()
				if err != nil {
					t.Fatalf("%s: tensor not the host's after Run: %v", c, err)
				}
				compare(t, c.String(), tensorValues(tb, c.o.Out), tensorValues(want, c.o.Out), c.o.Out)
			}
		})
	}
}

// A frame through the GPU path allocates nothing on the Go heap.
func TestGPURunAllocatesNothing(t *testing.T) {
	for _, lane := range gpuLanes {
		t.Run(lane.name, func(t *testing.T) {
			p := gpuPlacement(t, lane.o)
			f := sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}
			o := Options{Out: Output{C: 3, H: 224, W: 224}}
			g := newGPU(t, p, o, f.FrameSize(), lane.read)
			pool, err := umem.NewPool(p.Alloc, 2, f.FrameSize())
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			tensor, err := p.Alloc.Alloc(o.Out.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			defer tensor.Release()
			run := func() {
				slot, _ := pool.TryGet()
				if _, err := g.Run(slot.Buffer(), f.FrameSize(), f, tensor); err != nil {
					t.Fatal(err)
				}
				slot.Release()
			}
			run()
			if n := testing.AllocsPerRun(200, run); n != 0 {
				t.Errorf("%v allocations per frame, want 0", n)
			}
		})
	}
}

// Errors name what is wrong and leave the buffers usable.
func TestGPURunErrors(t *testing.T) {
	p := gpuPlacement(t, umem.Options{Strategy: umem.StrategyPinned})
	o := Options{Out: Output{C: 3, H: 32, W: 32}}
	g := newGPU(t, p, o, 1<<20, "")
	src, _ := p.Alloc.Alloc(1 << 20)
	defer src.Release()
	small, _ := p.Alloc.Alloc(100)
	defer small.Release()
	tensor, _ := p.Alloc.Alloc(o.Out.Bytes())
	defer tensor.Release()
	f := sensors.Format{Width: 64, Height: 48, Pixel: sensors.YUYV}
	if _, err := g.Run(src, 100, f, tensor); err == nil {
		t.Error("short frame: no error")
	}
	if _, err := g.Run(src, f.FrameSize(), f, small); err == nil {
		t.Error("small tensor: no error")
	}
	if _, err := g.Run(src, f.FrameSize(), sensors.Format{Width: 64, Height: 48, Pixel: sensors.MJPEG}, tensor); !errors.Is(err, ErrUnsupported) {
		t.Errorf("MJPEG: %v, want ErrUnsupported", err)
	}
	if _, err := g.Run(src, f.FrameSize(), f, tensor); err != nil {
		t.Errorf("after the errors: %v", err)
	}
	if _, err := tensor.Host(); err != nil {
		t.Errorf("tensor after Run: %v", err)
	}
}

// bytesNeeded is what the kernel must move at least: every source row it
// samples (the whole row: at these downscales every 32-byte sector of a
// sampled row is read) and every output element once.
func bytesNeeded(f sensors.Format, o Options) int64 {
	geo := Place(f.Width, f.Height, o.Out.W, o.Out.H, o.Resize)
	ih := geo.Y1 - geo.Y0
	rows := map[int]bool{}
	r := float64(f.Height) / float64(ih)
	for i := 0; i < ih; i++ {
		if o.Filter == Area && r > 1 {
			for y := int(float64(i) * r); y < min(int(math.Ceil(float64(i+1)*r)), f.Height); y++ {
				rows[y] = true
			}
			continue
		}
		s := max((float64(i)+0.5)*r-0.5, 0)
		y0 := min(int(s), f.Height-1)
		rows[y0], rows[min(y0+1, f.Height-1)] = true, true
	}
	n := int64(len(rows)) * int64(f.LineBytes())
	if f.Pixel == sensors.NV12 {
		uv := map[int]bool{}
		for y := range rows {
			uv[y/2] = true
		}
		n += int64(len(uv)) * int64(f.LineBytes())
	}
	return n + int64(o.Out.Bytes())
}

// spinSource keeps the GPU busy for a number of clock cycles; edged_empty
// does nothing, to time what launching a grid costs.
const spinSource = `extern "C" __global__ void edged_spin(long long cycles) {
	long long t = clock64();
	while (clock64() - t < cycles) {}
}
extern "C" __global__ void edged_empty() {}`

// BenchmarkGPUKernel times the fused kernel alone (CUDA events around
// back-to-back launches on device memory) against the device's copy
// bandwidth measured in the same run: roofline = bytes needed / (copy
// bytes per second of a 256 MiB copy), reported as a fraction of the
// kernel's time ("of-roofline"); and against a device copy of the same
// number of bytes timed the same way ("of-same-bytes-copy"), which
// includes what any operation of that size pays to start and drain.
// "launch-floor-µs" is an empty kernel with the same grid timed the same
// way, and "best-possible-of-roofline" = roofline / (floor + roofline):
// the fraction a kernel of that grid would reach moving its bytes at the
// full copy bandwidth after launching.
func BenchmarkGPUKernel(b *testing.B) {
	p := gpuPlacement(b, umem.Options{Strategy: umem.StrategyPinned})
	d := p.Device
	gt := newGPUTimer(b, d)
	cases := []struct {
		name string
		f    sensors.Format
		o    Options
	}{
		{"4K-YUYV-to-640-fp16-letterbox", sensors.Format{Width: 3840, Height: 2160, Pixel: sensors.YUYV},
			Options{Resize: Letterbox, Out: Output{C: 3, H: 640, W: 640, Half: true}}},
		{"4K-YUYV-to-640-fp16-letterbox-area", sensors.Format{Width: 3840, Height: 2160, Pixel: sensors.YUYV},
			Options{Resize: Letterbox, Filter: Area, Out: Output{C: 3, H: 640, W: 640, Half: true}}},
		{"1080p-YUYV-to-224-fp32", sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV},
			Options{Out: Output{C: 3, H: 224, W: 224}}},
		{"1080p-NV12-to-640-fp16-letterbox", sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.NV12},
			Options{Resize: Letterbox, Out: Output{C: 3, H: 640, W: 640, Half: true}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			g := newGPU(b, p, c.o, c.f.FrameSize(), ReadCopy)
			src, err := d.Alloc(c.f.FrameSize(), umem.MemOptions{Kind: umem.KindDevice})
			if err != nil {
				b.Fatal(err)
			}
			defer src.Release()
			dst, err := d.Alloc(c.o.Out.Bytes(), umem.MemOptions{Kind: umem.KindDevice})
			if err != nil {
				b.Fatal(err)
			}
			defer dst.Release()
			g.plan(c.f)
			fn := g.kernel(c.f.Pixel)
			// launch on the benchmark's stream, device buffers only
			g.stream, gt.s = gt.s, g.stream
			defer func() { g.stream, gt.s = gt.s, g.stream }()
			const per = 200
			if err := g.launch(fn, c.f, src.Device(), dst.Device()); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			kernel := gt.timed(b, g.stream, per, func() error { return g.launch(fn, c.f, src.Device(), dst.Device()) })
			need := bytesNeeded(c.f, c.o)
			roof := float64(need) / gt.bw
			// The same bytes moved by the copy engine's kernel-free path:
			// a device-to-device copy of need/2 bytes (read + write =
			// need), timed the same way — the practical floor at this size.
			same := gt.timed(b, g.stream, per, func() error { return g.stream.Copy(gt.c1, gt.c0, int(need/2)) })
			// The launch's grid running an empty kernel.
			grid, block := launchGrid(c.o.Out)
			floor := gt.timed(b, g.stream, per, func() error { return gt.empty.Launch(g.stream, grid, block, 0, &gt.none) })
			b.ReportMetric(kernel*1e6, "kernel-µs")
			b.ReportMetric(float64(need)/1e6, "MB-needed")
			b.ReportMetric(gt.bw/1e9, "copy-GB/s")
			b.ReportMetric(roof/kernel, "of-roofline")
			b.ReportMetric(same*1e6, "same-bytes-copy-µs")
			b.ReportMetric(same/kernel, "of-same-bytes-copy")
			b.ReportMetric(floor*1e6, "launch-floor-µs")
			b.ReportMetric(roof/(floor+roof), "best-possible-of-roofline")
		})
	}
}

// gpuTimer times GPU work with CUDA events: the device's copy bandwidth
// (bw, bytes read + written per second of a 256 MiB device-to-device
// copy), a spinning kernel that keeps the GPU busy while launches are
// enqueued, an empty kernel for the launch floor, and the two 256 MiB
// buffers (c0, c1) a benchmark may copy between.
type gpuTimer struct {
	s           *umem.Stream
	e0, e1      *umem.Event
	spin, empty *umem.Kernel
	spinArgs    umem.Args
	none        umem.Args
	c0, c1      *umem.Mem
	bw          float64
}

func newGPUTimer(b *testing.B, d *umem.Device) *gpuTimer {
	b.Helper()
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	gt := &gpuTimer{s: s}
	gt.e0, _ = d.NewEvent(true)
	gt.e1, _ = d.NewEvent(true)
	b.Cleanup(func() { gt.e0.Close(); gt.e1.Close() })
	const cb = 256 << 20
	for _, m := range []**umem.Mem{&gt.c0, &gt.c1} {
		*m, err = d.Alloc(cb, umem.MemOptions{Kind: umem.KindDevice})
		if err != nil {
			b.Fatal(err)
		}
		mem := *m
		b.Cleanup(func() { mem.Release() })
	}
	s.Copy(gt.c1, gt.c0, cb)
	gt.e0.Record(s)
	for i := 0; i < 10; i++ {
		s.Copy(gt.c1, gt.c0, cb)
	}
	gt.e1.Record(s)
	gt.e1.Synchronize()
	el, _ := gt.e1.Elapsed(gt.e0)
	gt.bw = float64(2*cb*10) / el.Seconds()
	ptx, err := d.Compile(spinSource, umem.CompileOptions{Name: "spin.cu", CacheDir: gpuCacheDir, Library: os.Getenv("EDGED_NVRTC_LIB")})
	if err != nil {
		b.Fatal(err)
	}
	mod, err := d.LoadModule(ptx.Code)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mod.Close() })
	if gt.spin, err = mod.Kernel("edged_spin"); err != nil {
		b.Fatal(err)
	}
	if gt.empty, err = mod.Kernel("edged_empty"); err != nil {
		b.Fatal(err)
	}
	return gt
}

// timed runs per launches b.N times on s behind a spinning kernel (the
// GPU spins while they are enqueued, so the events time the GPU work, not
// the CPU's launch rate) and returns seconds per launch.
func (gt *gpuTimer) timed(b *testing.B, s *umem.Stream, per int, launch func() error) float64 {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		gt.spinArgs.Reset()
		gt.spinArgs.U64(5_000_000)
		if err := gt.spin.Launch(s, umem.D1(1), umem.D1(1), 0, &gt.spinArgs); err != nil {
			b.Fatal(err)
		}
		gt.e0.Record(s)
		for j := 0; j < per; j++ {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
		}
		gt.e1.Record(s)
		if err := gt.e1.Synchronize(); err != nil {
			b.Fatal(err)
		}
		el, _ := gt.e1.Elapsed(gt.e0)
		total += el
	}
	return total.Seconds() / float64(b.N*per)
}

// BenchmarkGPURun is one frame as the pipeline runs it: a pinned or
// managed slot handed to the stream, the kernel writing the engine input
// tensor (pinned: mapped, so a CPU engine reads it in place), the stream
// synchronised and both buffers the host's again. The CPU path on the same
// frame is in the same run for the ratio.
func BenchmarkGPURun(b *testing.B) {
	f := sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}
	o := Options{Out: Output{C: 3, H: 224, W: 224}, Scale: 1.0 / 255,
		Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}}
	src := frameBytes(f, true, 3)
	for _, lane := range gpuLanes {
		b.Run(lane.name, func(b *testing.B) {
			p := gpuPlacement(b, lane.o)
			g := newGPU(b, p, o, f.FrameSize(), lane.read)
			pool, err := umem.NewPool(p.Alloc, 1, f.FrameSize())
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			tensor, err := p.Alloc.Alloc(o.Out.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			defer tensor.Release()
			slot, _ := pool.TryGet()
			h, _ := slot.Buffer().Host()
			copy(h, src)
			slot.Release()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				slot, _ := pool.TryGet()
				if _, err := g.Run(slot.Buffer(), f.FrameSize(), f, tensor); err != nil {
					b.Fatal(err)
				}
				slot.Release()
			}
		})
	}
}
