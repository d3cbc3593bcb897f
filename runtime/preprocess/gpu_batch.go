package preprocess

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// BatchFrame is one camera's frame of a batch.
type BatchFrame struct {
	Src    umem.Buffer // the frame slot's buffer
	N      int         // bytes of the frame in Src
	Format sensors.Format
	// Entry is the frame's slice of the batched tensor: entry i starts at
	// i × Out.Bytes().
	Entry int
}

// descBytes is the size of one struct Desc of the _batch kernels.
const descBytes = 64

// batchState is what RunBatch keeps between batches: grown to the largest
// batch seen, never per batch.
type batchState struct {
	ups      []*umem.Uploader // copy mode: one staging buffer per frame of a batch
	upCap    []int
	attached []*umem.Mem // in-place mode: the slots handed to the stream
	host     umem.Buffer // the descriptor table as the CPU writes it (pageable)
	dev      *umem.Mem   // and as the kernels read it
	outStage *umem.Mem   // a batched tensor the GPU cannot address
	geo      []Geometry  // of each frame of the batch being run
}

func (s *batchState) close() error {
	var errs []error
	for _, u := range s.ups { // nil where no frame of that place was copied (in-place modes, smaller batches)
		if u != nil {
			errs = append(errs, u.Close())
		}
	}
	if s.host != nil {
		errs = append(errs, s.host.Release())
	}
	for _, m := range []*umem.Mem{s.dev, s.outStage} {
		if m != nil {
			errs = append(errs, m.Release())
		}
	}
	*s = batchState{}
	return errors.Join(errs...)
}

// RunBatch converts each frame into its entry of dst, the engine's batched
// input tensor (entries no frame names are left as they are), and writes
// frame i's transform to trs[i]. The frames of one pixel format are
// converted by one kernel launch whatever their sizes, so a batch of
// cameras of one kind pays the launch once; each other format costs a
// launch more. It returns when the tensor is written and every buffer is
// the host's again; in steady state it allocates nothing.
func (g *GPU) RunBatch(frames []BatchFrame, dst umem.Buffer, trs []Transform) error {
	n := len(frames)
	if n == 0 {
		return nil
	}
	if len(trs) < n {
		return fmt.Errorf("preprocess: %d transforms for %d frames", len(trs), n)
	}
	per := g.o.Out.Bytes()
	for i := range frames {
		fr := &frames[i]
		if err := g.checkBatchFrame(fr, dst.Len(), per); err != nil {
			return fmt.Errorf("preprocess: frame %d of the batch: %w", i, err)
		}
		if j := sameBuffer(frames, i); j >= 0 {
			// Each frame is handed to the stream and back once: one
			// camera's slot cannot be two frames of a batch.
			return fmt.Errorf("preprocess: frames %d and %d of the batch are in the same buffer", j, i)
		}
	}
	if err := g.grow(n); err != nil {
		return err
	}
	bs := &g.bat
	table, err := bs.host.Host()
	if err != nil {
		return fmt.Errorf("preprocess: descriptor table: %w", err)
	}
	for i := range frames {
		bs.geo[i] = g.batchGeometry(frames[i].Format)
		trs[i] = bs.geo[i].Transform
	}
	// Hand every frame to the stream and fill the table grouped by pixel
	// format, in the order the launches read it. Whatever happens, every
	// frame handed over is given back (endBatch).
	var errs error
	at := 0
	for i := range frames {
		if !firstOfFormat(frames, i) {
			continue
		}
		for j := i; j < n; j++ {
			if frames[j].Format.Pixel != frames[i].Format.Pixel {
				continue
			}
			src, err := g.beginBatchFrame(j, &frames[j])
			if err != nil {
				errs = err
				break
			}
			g.putDesc(table[at*descBytes:(at+1)*descBytes], src, &frames[j], &bs.geo[j])
			at++
		}
		if errs != nil {
			break
		}
	}
	var dstPtr uintptr
	var dm *umem.Mem
	if errs == nil {
		dstPtr, dm, errs = g.beginBatchDst(dst)
	}
	if errs == nil {
		errs = g.stream.Copy(bs.dev, bs.host, n*descBytes)
	}
	if errs == nil {
		at = 0
		for i := range frames {
			if !firstOfFormat(frames, i) {
				continue
			}
			bk := g.batchKernel(frames[i].Format.Pixel)
			count, blocks := 0, 0
			for j := i; j < n; j++ {
				if frames[j].Format.Pixel == frames[i].Format.Pixel {
					count++
					blocks = max(blocks, bk.shape.blocks(g.o.Out, &bs.geo[j]))
				}
			}
			if errs = g.launchBatch(bk, bs.dev.Device()+uintptr(at*descBytes), count, blocks, dstPtr); errs != nil {
				break
			}
			at += count
		}
	}
	if errs == nil && dm == nil && bs.outStage != nil {
		errs = g.stream.Copy(dst, bs.outStage, dst.Len())
	}
	if dm != nil {
		errs = errors.Join(errs, dm.Detach(g.stream))
	}
	return errors.Join(errs, g.endBatch(n))
}

// sameBuffer is the index of an earlier frame in frame i's buffer, or -1.
func sameBuffer(frames []BatchFrame, i int) int {
	for j := 0; j < i; j++ {
		if frames[j].Src == frames[i].Src {
			return j
		}
	}
	return -1
}

func firstOfFormat(frames []BatchFrame, i int) bool {
	for j := 0; j < i; j++ {
		if frames[j].Format.Pixel == frames[i].Format.Pixel {
			return false
		}
	}
	return true
}

func (g *GPU) checkBatchFrame(fr *BatchFrame, dstLen, per int) error {
	f := fr.Format
	if f.Width <= 0 || f.Height <= 0 {
		return fmt.Errorf("bad frame size %dx%d", f.Width, f.Height)
	}
	if g.k.batch[f.Pixel] == nil {
		return fmt.Errorf("%w: pixel format %s on the GPU (MJPEG must be decoded by the source)", ErrUnsupported, f.Pixel)
	}
	if need := f.FrameSize(); fr.N < need || fr.N > fr.Src.Len() {
		return fmt.Errorf("frame has %d bytes in a %d-byte buffer, %s needs %d", fr.N, fr.Src.Len(), f, need)
	}
	if fr.Entry < 0 || (fr.Entry+1)*per > dstLen {
		return fmt.Errorf("entry %d: the tensor holds %d bytes, %d entries of %s", fr.Entry, dstLen, dstLen/per, g.o.Out)
	}
	return nil
}

// grow sizes the batch state for n frames.
func (g *GPU) grow(n int) error {
	bs := &g.bat
	if len(bs.geo) >= n {
		return nil
	}
	if bs.host != nil {
		bs.host.Release()
		bs.dev.Release()
	}
	host, err := umem.NewHost().Alloc(n * descBytes)
	if err != nil {
		return fmt.Errorf("preprocess: descriptor table: %w", err)
	}
	dev, err := g.stream.Device().Alloc(n*descBytes, umem.MemOptions{Kind: umem.KindDevice})
	if err != nil {
		host.Release()
		bs.host, bs.dev = nil, nil
		return fmt.Errorf("preprocess: descriptor table: %w", err)
	}
	bs.host, bs.dev = host, dev
	bs.geo = make([]Geometry, n)
	bs.attached = make([]*umem.Mem, n)
	for len(bs.ups) < n {
		bs.ups = append(bs.ups, nil)
		bs.upCap = append(bs.upCap, 0)
	}
	return nil
}

// batchGeometry is where a frame of format f lands in an entry.
func (g *GPU) batchGeometry(f sensors.Format) Geometry {
	return Place(f.Width, f.Height, g.o.Out.W, g.o.Out.H, g.o.Resize)
}

// beginBatchFrame hands frame i of the batch to the stream and returns the
// address the kernel reads it at.
func (g *GPU) beginBatchFrame(i int, fr *BatchFrame) (uintptr, error) {
	bs := &g.bat
	if g.read == ReadCopy {
		if fr.N > bs.upCap[i] {
			if bs.ups[i] != nil {
				bs.ups[i].Close()
				bs.ups[i], bs.upCap[i] = nil, 0
			}
			up, err := g.g.Placement.NewUploader(g.stream, max(fr.N, g.g.MaxFrameBytes))
			if err != nil {
				return 0, fmt.Errorf("preprocess: %w", err)
			}
			bs.ups[i], bs.upCap[i] = up, max(fr.N, g.g.MaxFrameBytes)
		}
		return bs.ups[i].Begin(fr.Src, fr.N)
	}
	m, ok := fr.Src.(*umem.Mem)
	if !ok || m.Device() == 0 {
		return 0, fmt.Errorf("preprocess: a %s frame buffer cannot be read in place by the GPU", fr.Src.Kind())
	}
	if err := m.Attach(g.stream); err != nil {
		return 0, fmt.Errorf("preprocess: %w", err)
	}
	bs.attached[i] = m
	return m.Device(), nil
}

// endBatch waits for the stream and gives the frames of a batch of n that
// were handed to it back to the host (an uploader not begun ends as a
// no-op).
func (g *GPU) endBatch(n int) error {
	bs := &g.bat
	var err error
	for i := 0; i < n; i++ {
		if g.read == ReadCopy {
			if bs.ups[i] != nil {
				err = errors.Join(err, bs.ups[i].End())
			}
			continue
		}
		if m := bs.attached[i]; m != nil {
			if m.Owner() == g.stream {
				err = errors.Join(err, m.Detach(g.stream))
			}
			bs.attached[i] = nil
		}
	}
	return errors.Join(err, g.stream.Synchronize())
}

// beginBatchDst is beginDst for a batched tensor.
func (g *GPU) beginBatchDst(dst umem.Buffer) (uintptr, *umem.Mem, error) {
	if m, ok := dst.(*umem.Mem); ok && m.Device() != 0 {
		if err := m.Attach(g.stream); err != nil {
			return 0, nil, fmt.Errorf("preprocess: tensor: %w", err)
		}
		return m.Device(), m, nil
	}
	bs := &g.bat
	if bs.outStage == nil || bs.outStage.Len() < dst.Len() {
		if bs.outStage != nil {
			bs.outStage.Release()
			bs.outStage = nil
		}
		m, err := g.stream.Device().Alloc(dst.Len(), umem.MemOptions{Kind: umem.KindDevice})
		if err != nil {
			return 0, nil, fmt.Errorf("preprocess: tensor staging buffer: %w", err)
		}
		bs.outStage = m
	}
	// Entries no frame names keep what the tensor holds.
	if err := g.stream.Copy(bs.outStage, dst, dst.Len()); err != nil {
		return 0, nil, fmt.Errorf("preprocess: tensor staging buffer: %w", err)
	}
	return bs.outStage.Device(), nil, nil
}

// putDesc writes frame fr's struct Desc (see kernelSource) into b.
func (g *GPU) putDesc(b []byte, src uintptr, fr *BatchFrame, geo *Geometry) {
	f := fr.Format
	fl := g.flags(f, src, geo)
	iw, ih := geo.X1-geo.X0, geo.Y1-geo.Y0
	e := binary.NativeEndian
	e.PutUint64(b[0:], uint64(src))
	for i, v := range [...]int{f.LineBytes(), f.Width, f.Height, fl, geo.X0, geo.Y0, iw, ih} {
		e.PutUint32(b[8+4*i:], uint32(int32(v)))
	}
	e.PutUint32(b[40:], math.Float32bits(float32(float64(f.Width)/float64(iw))))
	e.PutUint32(b[44:], math.Float32bits(float32(float64(f.Height)/float64(ih))))
	e.PutUint32(b[48:], uint32(int32(fr.Entry)))
	for i := 52; i < descBytes; i++ {
		b[i] = 0
	}
}

// flags are the kernel's flag bits for a frame of format f at src placed
// at geo: what launch computes for one frame.
func (g *GPU) flags(f sensors.Format, src uintptr, geo *Geometry) int {
	out := g.o.Out
	fl := 0
	if g.o.Filter == Area {
		if f.Width > geo.X1-geo.X0 {
			fl |= flAreaX
		}
		if f.Height > geo.Y1-geo.Y0 {
			fl |= flAreaY
		}
	}
	if out.NHWC {
		fl |= flNHWC
	}
	if out.Half {
		fl |= flHalf
	}
	if g.o.BGR {
		fl |= flBGR
	}
	if f.LineBytes()%4 == 0 && src%4 == 0 {
		fl |= flAlign
	}
	return fl
}

// batchShape is a launch shape of the tiles kernels (kernelSource): NX
// output pixels per thread in the rows that hold image pixels, PadW per
// thread in the rows above and below the image, blocks of 32 × BY
// threads, grid (blocks per frame, frames); PerSM > 0 makes the grid
// PerSM blocks per SM in all, each looping over its frame's tiles. The zero
// shape is the BKERNEL grid: one thread per output pixel in 32×8 blocks,
// block z converting frame z.
type batchShape struct{ NX, PadW, BY, PerSM int }

// productBatch is the shape of the product's bilinear batch kernels
// (BATCH in kernelSource); with the area filter they are the one pixel a
// thread kernels of the zero shape (BKERNEL).
var productBatch = batchShape{NX: 2, PadW: 8, BY: 8}

// blocks is how many blocks a frame placed at geo takes.
func (s batchShape) blocks(out Output, geo *Geometry) int {
	if s.NX == 0 {
		grid, _ := launchGrid(out)
		return int(grid.X * grid.Y)
	}
	ih := geo.Y1 - geo.Y0
	ceil := func(a, b int) int { return (a + b - 1) / b }
	return ceil(out.W, 32*s.NX)*ceil(ih, s.BY) + ceil(out.W, 32*s.PadW)*ceil(out.H-ih, s.BY)
}

// grid is the launch shape for count frames of which the largest takes
// blocks blocks, on a device of sms SMs.
func (s batchShape) grid(out Output, blocks, count, sms int) (grid, block umem.Dim3) {
	if s.NX == 0 {
		grid, block = launchGrid(out)
		grid.Z = uint32(count)
		return grid, block
	}
	x := blocks
	if s.PerSM > 0 {
		x = min(x, max(1, (s.PerSM*sms+count-1)/count))
	}
	return umem.Dim3{X: uint32(x), Y: uint32(count), Z: 1}, umem.Dim3{X: 32, Y: uint32(s.BY), Z: 1}
}

// batchKernel is a batch kernel and its launch shape.
type batchKernel struct {
	fn    *umem.Kernel
	shape batchShape
}

// batchKernel is what RunBatch launches for frames of pixel format pf.
func (g *GPU) batchKernel(pf sensors.PixelFormat) batchKernel {
	if bk, ok := g.batchTest[pf]; ok {
		return bk
	}
	if g.o.Filter == Area {
		return batchKernel{fn: g.k.area[pf]}
	}
	return batchKernel{fn: g.k.batch[pf], shape: productBatch}
}

// launchBatch launches a batch kernel over count descriptors at desc, the
// largest frame taking blocks blocks.
func (g *GPU) launchBatch(bk batchKernel, desc uintptr, count, blocks int, dst uintptr) error {
	out := g.o.Out
	a := &g.args
	a.Reset()
	a.Ptr(desc)
	a.Ptr(dst)
	a.I32(int32(out.W))
	a.I32(int32(out.H))
	a.I32(int32(out.C))
	g.normArgs(a)
	grid, block := bk.shape.grid(out, blocks, count, g.stream.Device().Probe().Multiprocs)
	return bk.fn.Launch(g.stream, grid, block, 0, a)
}
