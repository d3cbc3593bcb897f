package preprocess

import (
	"errors"
	"fmt"
	"sync"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// ErrNoGPU means GPU preprocessing was asked for where there is no CUDA
// device (or no NVRTC to compile the kernels).
var ErrNoGPU = errors.New("preprocess: no GPU")

// Source read modes of the GPU path.
const (
	// ReadCopy copies the frame into a device staging buffer (pinned or
	// pageable slots on a discrete GPU), then the kernel reads it there.
	ReadCopy = "copy"
	// ReadInPlace has the kernel read the slot itself: managed memory
	// (Jetson, attached to the stream under the concurrentManagedAccess = 0
	// rules) or mapped pinned memory (zero-copy over the bus).
	ReadInPlace = "in-place"
)

// GPUOptions configure a GPU preprocessor.
type GPUOptions struct {
	// Placement is the memory placement of the daemon: its device, and how
	// frame slots reach the GPU.
	Placement *umem.Placement
	// MaxFrameBytes sizes the device staging buffer of the copy mode; 0
	// sizes it from the first frame (a larger frame later replaces it).
	MaxFrameBytes int
	// CacheDir keeps the compiled kernels across starts ("" = none).
	CacheDir string
	// NVRTC is the NVRTC library ("" = search the usual names).
	NVRTC string
	// Read is ReadCopy or ReadInPlace; "" picks by the kind of the
	// placement's frames (Placement.Frames): in place for managed, mapped
	// and device memory (a decoder's pictures on the GPU: reading them in
	// place is what keeps them off the host), in place for pinned slots
	// when ReadInPlacePinned, else a copy.
	Read string
	// ReadInPlacePinned reads pinned slots over the bus instead of copying
	// them (see docs/PERFORMANCE.md for when that is faster).
	ReadInPlacePinned bool
}

// kernels is a compiled module, shared by every GPU preprocessor of a
// device: compiling takes NVRTC hundreds of milliseconds, loading it once
// per device is enough.
type kernels struct {
	mod    *umem.Module
	byPix  map[sensors.PixelFormat]*umem.Kernel
	batch  map[sensors.PixelFormat]*umem.Kernel // the _batch kernels (gpu_batch.go): bilinear
	area   map[sensors.PixelFormat]*umem.Kernel // the _batch_area kernels: any filter
	ptx    *umem.PTX
	refs   int
	device *umem.Device
}

var (
	kernelsMu  sync.Mutex
	kernelsFor = map[*umem.Device]*kernels{}
)

var kernelNames = map[sensors.PixelFormat]string{
	sensors.YUYV: "edged_pre_yuyv", sensors.UYVY: "edged_pre_uyvy", sensors.NV12: "edged_pre_nv12",
	sensors.GREY: "edged_pre_grey", sensors.RGB24: "edged_pre_rgb24", sensors.BGR24: "edged_pre_bgr24",
}

func acquireKernels(d *umem.Device, o GPUOptions) (*kernels, error) {
	kernelsMu.Lock()
	defer kernelsMu.Unlock()
	if k := kernelsFor[d]; k != nil {
		k.refs++
		return k, nil
	}
	ptx, err := d.Compile(kernelSource, umem.CompileOptions{Name: "edged_preprocess.cu", CacheDir: o.CacheDir, Library: o.NVRTC})
	if err != nil {
		return nil, fmt.Errorf("%w: compiling the preprocessing kernels: %w", ErrNoGPU, err)
	}
	mod, err := d.LoadModule(ptx.Code)
	if err != nil {
		return nil, fmt.Errorf("preprocess: loading the preprocessing kernels: %w", err)
	}
	k := &kernels{mod: mod, byPix: map[sensors.PixelFormat]*umem.Kernel{}, batch: map[sensors.PixelFormat]*umem.Kernel{},
		area: map[sensors.PixelFormat]*umem.Kernel{}, ptx: ptx, refs: 1, device: d}
	for pf, name := range kernelNames {
		f, err := mod.Kernel(name)
		if err != nil {
			mod.Close()
			return nil, fmt.Errorf("preprocess: %w", err)
		}
		k.byPix[pf] = f
		bf, err := mod.Kernel(name + "_batch")
		if err != nil {
			mod.Close()
			return nil, fmt.Errorf("preprocess: %w", err)
		}
		k.batch[pf] = bf
		af, err := mod.Kernel(name + "_batch_area")
		if err != nil {
			mod.Close()
			return nil, fmt.Errorf("preprocess: %w", err)
		}
		k.area[pf] = af
	}
	kernelsFor[d] = k
	return k, nil
}

func (k *kernels) release() {
	kernelsMu.Lock()
	defer kernelsMu.Unlock()
	k.refs--
	if k.refs == 0 {
		delete(kernelsFor, k.device)
		k.mod.Close()
	}
}

// GPU preprocesses frames on a CUDA device with one fused kernel per
// source format, writing straight into the engine input tensor. It is
// used by one goroutine at a time (the pipeline's inference loop); a frame
// allocates nothing.
type GPU struct {
	o      Options
	g      GPUOptions
	k      *kernels
	stream *umem.Stream
	up     *umem.Uploader // copy mode: staging for frames of up to upCap bytes
	upCap  int
	read   string
	a, b   [3]float32
	yuv    Coeffs

	outStage *umem.Mem // device buffer for a tensor the GPU cannot address
	args     umem.Args
	bat      batchState // RunBatch's buffers (gpu_batch.go)
	// batchTest replaces the product's batch kernel of a pixel format
	// (tests and benchmarks of other shapes); nil in the product.
	batchTest map[sensors.PixelFormat]batchKernel

	// geometry of the last frame format
	key  [4]int
	geo  Geometry
	flAx int

	closeOnce sync.Once
}

// NewGPU compiles (or takes from the cache) the kernels for the placement's
// device and returns a preprocessor for tensors described by o.Out.
func NewGPU(o Options, g GPUOptions) (*GPU, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p := g.Placement
	if p == nil || p.Device == nil {
		return nil, fmt.Errorf("%w: the memory placement has no CUDA device", ErrNoGPU)
	}
	k, err := acquireKernels(p.Device, g)
	if err != nil {
		return nil, err
	}
	s, err := p.Device.NewStream()
	if err != nil {
		k.release()
		return nil, fmt.Errorf("preprocess: %w", err)
	}
	gp := &GPU{o: o, g: g, k: k, stream: s, yuv: ColorCoeffs(o.Matrix, o.FullRange)}
	gp.a, gp.b = o.Affine()
	gp.read = g.Read
	if gp.read == "" {
		gp.read = ReadCopy
		switch p.Frames {
		case umem.KindManaged, umem.KindMapped, umem.KindDevice:
			gp.read = ReadInPlace
		case umem.KindPinned:
			if g.ReadInPlacePinned {
				gp.read = ReadInPlace
			}
		}
	}
	if gp.read != ReadCopy && gp.read != ReadInPlace {
		gp.Close()
		return nil, fmt.Errorf("%w: read mode %q (want %q or %q)", ErrUnsupported, gp.read, ReadCopy, ReadInPlace)
	}
	if gp.read == ReadCopy && g.MaxFrameBytes > 0 {
		if err := gp.stage(g.MaxFrameBytes); err != nil {
			gp.Close()
			return nil, err
		}
	}
	return gp, nil
}

// kernel is the kernel for a source format, nil for an unsupported one.
func (g *GPU) kernel(pf sensors.PixelFormat) *umem.Kernel { return g.k.byPix[pf] }

// Read says how frames reach the kernel: ReadCopy or ReadInPlace.
func (g *GPU) Read() string { return g.read }

// PTX describes the compiled kernels (cache hit, NVRTC version, arch).
func (g *GPU) PTX() *umem.PTX { return g.k.ptx }

// Options returns the options the preprocessor was made with.
func (g *GPU) Options() Options { return g.o }

// Run converts the frame in the first n bytes of src (a frame slot's
// buffer, of format f) into dst, the engine input tensor's memory. It
// returns when the tensor is written and both buffers are the host's
// again.
func (g *GPU) Run(src umem.Buffer, n int, f sensors.Format, dst umem.Buffer) (Transform, error) {
	if f.Width <= 0 || f.Height <= 0 {
		return Transform{}, fmt.Errorf("preprocess: bad frame size %dx%d", f.Width, f.Height)
	}
	fn := g.kernel(f.Pixel)
	if fn == nil {
		return Transform{}, fmt.Errorf("%w: pixel format %s on the GPU (MJPEG must be decoded by the source)", ErrUnsupported, f.Pixel)
	}
	if need := f.FrameSize(); n < need {
		return Transform{}, fmt.Errorf("preprocess: frame has %d bytes, %s needs %d", n, f, need)
	}
	if dst.Len() < g.o.Out.Bytes() {
		return Transform{}, fmt.Errorf("preprocess: tensor holds %d bytes, %s needs %d", dst.Len(), g.o.Out, g.o.Out.Bytes())
	}
	g.plan(f)
	srcPtr, err := g.begin(src, n)
	if err != nil {
		return Transform{}, err
	}
	dstPtr, dm, err := g.beginDst(dst)
	if err != nil {
		g.end(src)
		return Transform{}, err
	}
	err = g.launch(fn, f, srcPtr, dstPtr)
	if err == nil && dm == nil && g.outStage != nil {
		err = g.stream.Copy(dst, g.outStage, g.o.Out.Bytes())
	}
	if dm != nil {
		if derr := dm.Detach(g.stream); err == nil {
			err = derr
		}
	}
	if eerr := g.end(src); err == nil {
		err = eerr
	}
	if err != nil {
		return Transform{}, err
	}
	return g.geo.Transform, nil
}

// begin hands the frame to the stream and returns the address the kernel
// reads.
func (g *GPU) begin(src umem.Buffer, n int) (uintptr, error) {
	if g.read == ReadCopy {
		if n > g.upCap {
			if err := g.stage(n); err != nil {
				return 0, err
			}
		}
		return g.up.Begin(src, n)
	}
	m, ok := src.(*umem.Mem)
	if !ok || m.Device() == 0 {
		return 0, fmt.Errorf("preprocess: a %s frame buffer cannot be read in place by the GPU", src.Kind())
	}
	if err := m.Attach(g.stream); err != nil {
		return 0, fmt.Errorf("preprocess: %w", err)
	}
	return m.Device(), nil
}

// stage (re)allocates the copy mode's device staging buffer for frames of
// n bytes: at the first frame or a larger format, never per frame.
func (g *GPU) stage(n int) error {
	if g.up != nil {
		g.up.Close()
		g.up, g.upCap = nil, 0
	}
	up, err := g.g.Placement.NewUploader(g.stream, n)
	if err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	g.up, g.upCap = up, n
	return nil
}

// end waits for the stream and gives the frame back to the host.
func (g *GPU) end(src umem.Buffer) error {
	if g.read == ReadCopy {
		return g.up.End()
	}
	var err error
	if m, ok := src.(*umem.Mem); ok && m.Owner() == g.stream {
		err = m.Detach(g.stream)
	}
	return errors.Join(err, g.stream.Synchronize())
}

// beginDst returns the address the kernel writes: the tensor itself when
// the GPU can address it (device, managed, mapped pinned memory; attached
// to the stream, returned as dm), else a device staging buffer copied to
// the tensor after the kernel.
func (g *GPU) beginDst(dst umem.Buffer) (uintptr, *umem.Mem, error) {
	if m, ok := dst.(*umem.Mem); ok && m.Device() != 0 {
		if err := m.Attach(g.stream); err != nil {
			return 0, nil, fmt.Errorf("preprocess: tensor: %w", err)
		}
		return m.Device(), m, nil
	}
	if g.outStage == nil {
		m, err := g.stream.Device().Alloc(g.o.Out.Bytes(), umem.MemOptions{Kind: umem.KindDevice})
		if err != nil {
			return 0, nil, fmt.Errorf("preprocess: tensor staging buffer: %w", err)
		}
		g.outStage = m
	}
	return g.outStage.Device(), nil, nil
}

// Flag bits of the kernels (see kernelSource).
const (
	flNHWC  = 1
	flHalf  = 2
	flBGR   = 4
	flAreaX = 8
	flAreaY = 16
	flAlign = 32
)

func (g *GPU) plan(f sensors.Format) {
	key := [4]int{f.Width, f.Height, f.LineBytes(), int(f.Pixel)}
	if key == g.key {
		return
	}
	g.key = key
	out := g.o.Out
	g.geo = Place(f.Width, f.Height, out.W, out.H, g.o.Resize)
	g.flAx = 0
	if g.o.Filter == Area {
		if f.Width > g.geo.X1-g.geo.X0 {
			g.flAx |= flAreaX
		}
		if f.Height > g.geo.Y1-g.geo.Y0 {
			g.flAx |= flAreaY
		}
	}
}

func (g *GPU) launch(fn *umem.Kernel, f sensors.Format, src, dst uintptr) error {
	out, geo := g.o.Out, g.geo
	fl := g.flAx
	if out.NHWC {
		fl |= flNHWC
	}
	if out.Half {
		fl |= flHalf
	}
	if g.o.BGR {
		fl |= flBGR
	}
	stride := f.LineBytes()
	if stride%4 == 0 && src%4 == 0 {
		fl |= flAlign
	}
	iw, ih := geo.X1-geo.X0, geo.Y1-geo.Y0
	a := &g.args
	a.Reset()
	a.Ptr(src)
	a.I32(int32(stride))
	a.I32(int32(f.Width))
	a.I32(int32(f.Height))
	a.Ptr(dst)
	a.I32(int32(out.W))
	a.I32(int32(out.H))
	a.I32(int32(out.C))
	a.I32(int32(fl))
	a.I32(int32(geo.X0))
	a.I32(int32(geo.Y0))
	a.I32(int32(iw))
	a.I32(int32(ih))
	a.F32(float32(float64(f.Width) / float64(iw)))
	a.F32(float32(float64(f.Height) / float64(ih)))
	g.normArgs(a)
	grid, block := launchGrid(out)
	return fn.Launch(g.stream, grid, block, 0, a)
}

// normArgs appends the kernels' last twelve arguments: the normalisation
// (a0..a2, b0..b2) and the YUV → RGB coefficients.
func (g *GPU) normArgs(a *umem.Args) {
	for _, v := range g.a {
		a.F32(v)
	}
	for _, v := range g.b {
		a.F32(v)
	}
	y := g.yuv
	for _, v := range [...]float32{y.YOff, y.YGain, y.RV, y.GU, y.GV, y.BU} {
		a.F32(v)
	}
}

// launchGrid is the kernels' launch shape: one thread per output pixel in
// blocks of 32×8.
func launchGrid(out Output) (grid, block umem.Dim3) {
	const bx, by = 32, 8
	return umem.Dim3{X: uint32((out.W + bx - 1) / bx), Y: uint32((out.H + by - 1) / by), Z: 1}, umem.Dim3{X: bx, Y: by, Z: 1}
}

// Close frees the stream, the staging buffers and its reference to the
// kernels. It is idempotent.
func (g *GPU) Close() error {
	var errs []error
	g.closeOnce.Do(func() {
		if g.up != nil {
			errs = append(errs, g.up.Close())
		}
		if g.outStage != nil {
			errs = append(errs, g.outStage.Release())
		}
		errs = append(errs, g.bat.close())
		errs = append(errs, g.stream.Close())
		g.k.release()
	})
	return errors.Join(errs...)
}
