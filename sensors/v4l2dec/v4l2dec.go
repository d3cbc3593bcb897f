package v4l2dec

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// Errors of this package.
var (
	// ErrNoDecoder: the Jetson decoder cannot be used here (no decoder
	// node, no libv4l2 or libnvbufsurface, a build without cgo).
	ErrNoDecoder = errors.New("v4l2dec: the Jetson video decoder is not available")
	// ErrDecode: the decoder refused an access unit, flagged an error, or
	// a picture could not be converted or copied.
	ErrDecode = errors.New("v4l2dec: decoding failed")
)

// Nodes are the decoder's device nodes, in the order NVIDIA's own
// NvVideoDecoder tries them (JetPack 4 named it nvhost-nvdec; JetPack 5
// and 6 v4l2-nvdec, opened through libv4l2's NVIDIA plugin, not with plain
// ioctls).
var Nodes = []string{"/dev/nvhost-nvdec", "/dev/v4l2-nvdec"}

// Options configure a decoder.
type Options struct {
	// Node is the decoder's device node; "" tries Nodes.
	Node string
	// Params are the stream's parameter sets as Annex-B (an SDP's); they
	// are queued before the first access unit.
	Params []byte
	// Wait bounds how long Receive waits for the picture of the access
	// unit just sent (the engine decodes in the background); 0: 30 ms.
	Wait time.Duration
}

// Probe says whether the Jetson decoder can serve here: the libraries
// load and a decoder node exists (which one).
func Probe() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	for _, n := range Nodes {
		if _, err := os.Stat(n); err == nil {
			return n, nil
		}
	}
	return "", fmt.Errorf("%w: none of %v exists (is this a Jetson with JetPack 5 or 6?)", ErrNoDecoder, Nodes)
}

// device is libv4l2's calls on the decoder node (v4l2_open, v4l2_ioctl,
// v4l2_mmap...; the tests' fake). Errors are syscall.Errno.
type device interface {
	open(node string) (int, error)
	ioctl(fd int, req uint, arg unsafe.Pointer) error
	mmap(fd int, offset int64, n int) ([]byte, error)
	munmap(b []byte) error
	close(fd int) error
}

// surfaces is NVIDIA's buffer library (NvBufSurface, NvBufSurfTransform)
// and its mapping for CUDA (EGL images registered with the CUDA driver):
// capture buffers are block-linear and must be converted to pitch-linear
// NV12 before CUDA reads them.
type surfaces interface {
	// fromFd wraps a capture buffer's dmabuf.
	fromFd(fd int) (uintptr, error)
	// allocNV12 makes a pitch-linear NV12 surface of w×h.
	allocNV12(w, h int) (uintptr, error)
	// convert copies (block- to pitch-linear) the w×h picture at left,
	// top of src into dst.
	convert(src, dst uintptr, left, top, w, h int) error
	// cuda maps a pitch-linear surface for CUDA: its luma and chroma
	// device addresses and the pitch; kept mapped until release.
	cuda(surf uintptr) (y, uv uintptr, pitch int, err error)
	release(surf uintptr) error
}

// gpu copies out of the mapped surface (internal/cuda; the fake).
type gpu interface {
	bind() error
	// attach gives managed memory at p to the decoder's stream (or back
	// to the host): a Jetson (concurrentManagedAccess = 0) lets the GPU
	// touch a managed frame slot only while a stream it works on owns it.
	// Other memory refuses it, which is harmless.
	attach(p uintptr, host bool) error
	copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error
	sync() error
	close()
}

// outBuf is a bitstream buffer, mapped.
type outBuf struct {
	mem  []byte
	busy bool
}

// args are the ioctl arguments of one call at a time; each a field, so a
// call allocates nothing.
type args struct {
	buf    [bufferSize]byte
	planes [2][planeSize]byte
	fmt    [formatSize]byte
	rb     [reqbufsSize]byte
	exp    [expbufSize]byte
	ev     [eventSize]byte
	crop   [cropSize]byte
	ctrl   [controlSize]byte
	ext    [extCtrlsSize]byte
	ectrl  [extCtrlSize]byte
	sub    [subSize]byte
	cmd    [decCmdSize]byte
	typ    [4]byte
}

// Decoder decodes one stream on the Jetson's decoder engine. Its methods
// must not be called concurrently.
type Decoder struct {
	dev   device
	surf  surfaces
	gpu   gpu
	codec h26x.Codec
	node  string
	fd    int
	wait  time.Duration
	a     *args

	out      []outBuf
	capture  []uintptr // the capture buffers' surfaces, by index
	streamed bool      // the capture plane streams
	w, h     int       // the visible picture
	left     int
	top      int
	pitchS   uintptr // the pitch-linear surface pictures are converted into
	y, uv    uintptr
	pitch    int

	held     int // capture buffer Receive reported, -1: none
	heldID   uint64
	heldErr  bool
	inFlight int // access units queued and not yet seen as pictures
	params   []byte
	sent     bool
	draining bool
	closed   bool
	changes  int
}

// newDecoder opens the node and prepares the bitstream plane; on error
// everything it made is undone.
func newDecoder(dev device, surf surfaces, g gpu, c h26x.Codec, o Options) (*Decoder, error) {
	pix := pixH264
	switch c {
	case h26x.H264:
	case h26x.H265:
		pix = pixH265
	default:
		g.close()
		return nil, fmt.Errorf("%w: codec %s", sensors.ErrFormat, c)
	}
	d := &Decoder{dev: dev, surf: surf, gpu: g, codec: c, fd: -1, wait: o.Wait, a: new(args), held: -1, params: o.Params}
	if d.wait == 0 {
		d.wait = 30 * time.Millisecond
	}
	nodes := Nodes
	if o.Node != "" {
		nodes = []string{o.Node}
	}
	var errs []error
	for _, n := range nodes {
		fd, err := dev.open(n)
		if err == nil {
			d.fd, d.node = fd, n
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", n, err))
	}
	if d.fd < 0 {
		g.close()
		return nil, fmt.Errorf("%w: %w", ErrNoDecoder, errors.Join(errs...))
	}
	if err := d.setupOutput(pix); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Decoder) ioctl(what string, req uint, arg unsafe.Pointer) error {
	if err := d.dev.ioctl(d.fd, req, arg); err != nil {
		return fmt.Errorf("%w: %s on %s: %w", ErrDecode, what, d.node, err)
	}
	return nil
}

// setupOutput: the bitstream format, frame input, the resolution event,
// the bitstream buffers (mapped) and STREAMON.
func (d *Decoder) setupOutput(pix uint32) error {
	a := d.a
	f := a.fmt[:]
	clear(f)
	set32(f, fmtType, bufTypeOutput)
	set32(f, fmtPixel, pix)
	set32(f, fmtPlane0Size, outputMaxBytes)
	f[fmtNumPlanes] = 1
	if err := d.ioctl("VIDIOC_S_FMT (bitstream)", vidiocSFmt, unsafe.Pointer(&a.fmt)); err != nil {
		return err
	}
	if err := d.setControl("frame input", cidDisableCompleteFrameInput, 0); err != nil {
		return err
	}
	if err := d.setControl("error reporting", cidErrorReporting, 1); err != nil {
		return err
	}
	clear(a.sub[:])
	set32(a.sub[:], subType, eventResolutionChange)
	if err := d.ioctl("VIDIOC_SUBSCRIBE_EVENT", vidiocSubscribeEvent, unsafe.Pointer(&a.sub)); err != nil {
		return err
	}
	n, err := d.reqbufs(bufTypeOutput, outputBuffers)
	if err != nil {
		return err
	}
	for i := range n {
		d.bufArgs(bufTypeOutput, i, 1)
		if err := d.ioctl("VIDIOC_QUERYBUF (bitstream)", vidiocQuerybuf, unsafe.Pointer(&a.buf)); err != nil {
			return err
		}
		p := a.planes[0][:]
		mem, err := d.dev.mmap(d.fd, int64(get32(p, plMemOffset)), int(get32(p, plLength)))
		if err != nil {
			return fmt.Errorf("%w: mapping bitstream buffer %d: %w", ErrDecode, i, err)
		}
		d.out = append(d.out, outBuf{mem: mem})
	}
	return d.streamOn(bufTypeOutput)
}

func (d *Decoder) setControl(what string, id, v uint32) error {
	a := d.a
	clear(a.ectrl[:])
	set32(a.ectrl[:], ecID, id)
	set32(a.ectrl[:], ecValue, v)
	clear(a.ext[:])
	set32(a.ext[:], ecClass, ctrlClassMPEG)
	set32(a.ext[:], ecCount, 1)
	set64(a.ext[:], ecControls, uint64(uintptr(unsafe.Pointer(&a.ectrl))))
	return d.ioctl("VIDIOC_S_EXT_CTRLS ("+what+")", vidiocSExtCtrls, unsafe.Pointer(&a.ext))
}

func (d *Decoder) reqbufs(typ uint32, n int) (int, error) {
	rb := d.a.rb[:]
	clear(rb)
	set32(rb, rbCount, uint32(n))
	set32(rb, rbType, typ)
	set32(rb, rbMemory, memoryMMAP)
	if err := d.ioctl("VIDIOC_REQBUFS", vidiocReqbufs, unsafe.Pointer(&d.a.rb)); err != nil {
		return 0, err
	}
	return int(get32(rb, rbCount)), nil
}

func (d *Decoder) streamOn(typ uint32) error {
	set32(d.a.typ[:], 0, typ)
	return d.ioctl("VIDIOC_STREAMON", vidiocStreamon, unsafe.Pointer(&d.a.typ))
}

func (d *Decoder) streamOff(typ uint32) error {
	set32(d.a.typ[:], 0, typ)
	return d.ioctl("VIDIOC_STREAMOFF", vidiocStreamoff, unsafe.Pointer(&d.a.typ))
}

// bufArgs fills the buffer argument for index i of a plane type with n
// planes (the planes' address inside the same args).
func (d *Decoder) bufArgs(typ uint32, i, n int) {
	a := d.a
	clear(a.buf[:])
	clear(a.planes[0][:])
	clear(a.planes[1][:])
	set32(a.buf[:], bufIndex, uint32(i))
	set32(a.buf[:], bufType, typ)
	set32(a.buf[:], bufMemory, memoryMMAP)
	set64(a.buf[:], bufPlanes, uint64(uintptr(unsafe.Pointer(&a.planes[0]))))
	set32(a.buf[:], bufLength, uint32(n))
}

// Describe names the decoder.
func (d *Decoder) Describe() string {
	return fmt.Sprintf("the Jetson video decoder (%s through libv4l2), %s", d.node, d.codec)
}

// Send queues one access unit on a free bitstream buffer (waiting for one
// the engine has consumed); id comes back with its picture.
func (d *Decoder) Send(au []byte, id uint64) error {
	if d.closed || d.draining {
		return fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	if len(au) == 0 {
		return nil
	}
	if !d.sent && len(d.params) > 0 {
		d.sent = true
		if err := d.queue(d.params, id); err != nil {
			return err
		}
	}
	d.sent = true
	if err := d.queue(au, id); err != nil {
		return err
	}
	d.inFlight++
	return d.events()
}

// queue copies b into a free bitstream buffer and queues it.
func (d *Decoder) queue(b []byte, id uint64) error {
	i, err := d.freeOutput()
	if err != nil {
		return err
	}
	o := &d.out[i]
	if len(b) > len(o.mem) {
		return fmt.Errorf("%w: an access unit of %d bytes, the bitstream buffers hold %d", ErrDecode, len(b), len(o.mem))
	}
	copy(o.mem, b)
	d.bufArgs(bufTypeOutput, i, 1)
	a := d.a
	set32(a.buf[:], bufFlags, bufFlagTimestampCopy)
	set64(a.buf[:], bufTimeSec, id/1_000_000)
	set64(a.buf[:], bufTimeUsec, id%1_000_000)
	set32(a.planes[0][:], plBytesUsed, uint32(len(b)))
	if err := d.ioctl("VIDIOC_QBUF (bitstream)", vidiocQbuf, unsafe.Pointer(&a.buf)); err != nil {
		return err
	}
	o.busy = true
	return nil
}

// freeOutput returns a bitstream buffer the engine is done with.
func (d *Decoder) freeOutput() (int, error) {
	for i := range d.out {
		if !d.out[i].busy {
			return i, nil
		}
	}
	deadline := time.Now().Add(time.Second)
	for {
		d.bufArgs(bufTypeOutput, 0, 1)
		err := d.dev.ioctl(d.fd, vidiocDqbuf, unsafe.Pointer(&d.a.buf))
		if err == nil {
			i := int(get32(d.a.buf[:], bufIndex))
			if i < 0 || i >= len(d.out) {
				return 0, fmt.Errorf("%w: the decoder returned bitstream buffer %d of %d", ErrDecode, i, len(d.out))
			}
			d.out[i].busy = false
			if get32(d.a.buf[:], bufFlags)&bufFlagError != 0 {
				return i, fmt.Errorf("%w: the decoder flagged an access unit as broken", ErrDecode)
			}
			return i, nil
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return 0, fmt.Errorf("%w: VIDIOC_DQBUF (bitstream) on %s: %w", ErrDecode, d.node, err)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%w: the decoder took no bitstream for 1 s", ErrDecode)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// events handles the decoder's events: a resolution change (the first
// one after the first key picture) sets the capture plane up again.
func (d *Decoder) events() error {
	for {
		clear(d.a.ev[:])
		err := d.dev.ioctl(d.fd, vidiocDqevent, unsafe.Pointer(&d.a.ev))
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EAGAIN) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: VIDIOC_DQEVENT on %s: %w", ErrDecode, d.node, err)
		}
		if get32(d.a.ev[:], evType) == eventResolutionChange {
			if err := d.setupCapture(); err != nil {
				return err
			}
		}
	}
}

// setupCapture reads the new format and crop, and makes the capture
// buffers and the pitch-linear surface again.
func (d *Decoder) setupCapture() error {
	a := d.a
	clear(a.fmt[:])
	set32(a.fmt[:], fmtType, bufTypeCapture)
	if err := d.ioctl("VIDIOC_G_FMT (pictures)", vidiocGFmt, unsafe.Pointer(&a.fmt)); err != nil {
		return err
	}
	if px := get32(a.fmt[:], fmtPixel); px != pixNV12M {
		return fmt.Errorf("%w: the decoder writes pixel format %#x; edged reads 8-bit 4:2:0 (NV12M) only", sensors.ErrFormat, px)
	}
	clear(a.crop[:])
	set32(a.crop[:], cropType, bufTypeCapture)
	if err := d.ioctl("VIDIOC_G_CROP", vidiocGCrop, unsafe.Pointer(&a.crop)); err != nil {
		return err
	}
	w, h := int(get32(a.crop[:], cropWidth)), int(get32(a.crop[:], cropHeight))
	if w <= 0 || h <= 0 || w > h26x.MaxDimension || h > h26x.MaxDimension {
		return fmt.Errorf("%w: a %dx%d picture", sensors.ErrFormat, w, h)
	}
	clear(a.ctrl[:])
	set32(a.ctrl[:], ctrlID, cidMinBuffersForCapture)
	if err := d.ioctl("VIDIOC_G_CTRL (minimum capture buffers)", vidiocGCtrl, unsafe.Pointer(&a.ctrl)); err != nil {
		return err
	}
	min := int(int32(get32(a.ctrl[:], ctrlValue)))
	d.releaseCapture()
	n, err := d.reqbufs(bufTypeCapture, min+captureExtra)
	if err != nil {
		return err
	}
	for i := range n {
		clear(a.exp[:])
		set32(a.exp[:], expType, bufTypeCapture)
		set32(a.exp[:], expIndex, uint32(i))
		if err := d.ioctl("VIDIOC_EXPBUF", vidiocExpbuf, unsafe.Pointer(&a.exp)); err != nil {
			return err
		}
		s, err := d.surf.fromFd(int(int32(get32(a.exp[:], expFd))))
		if err != nil {
			return fmt.Errorf("%w: NvBufSurfaceFromFd: %w", ErrDecode, err)
		}
		d.capture = append(d.capture, s)
	}
	runtime.LockOSThread() // the CUDA mapping needs the context current
	defer runtime.UnlockOSThread()
	if err := d.gpu.bind(); err != nil {
		return err
	}
	if d.pitchS, err = d.surf.allocNV12(w, h); err != nil {
		return fmt.Errorf("%w: NvBufSurfaceAllocate (%dx%d NV12): %w", ErrDecode, w, h, err)
	}
	if d.y, d.uv, d.pitch, err = d.surf.cuda(d.pitchS); err != nil {
		return fmt.Errorf("%w: mapping the NV12 surface for CUDA: %w", ErrDecode, err)
	}
	d.w, d.h = w, h
	d.left, d.top = int(int32(get32(a.crop[:], cropLeft))), int(int32(get32(a.crop[:], cropTop)))
	if err := d.streamOn(bufTypeCapture); err != nil {
		return err
	}
	d.streamed = true
	for i := range d.capture {
		if err := d.requeue(i); err != nil {
			return err
		}
	}
	d.changes++
	return nil
}

// releaseCapture stops the capture plane and frees its buffers and the
// pitch-linear surface (a resolution change, Close).
func (d *Decoder) releaseCapture() {
	if d.streamed {
		d.streamOff(bufTypeCapture)
		d.streamed = false
	}
	if d.pitchS != 0 {
		runtime.LockOSThread()
		d.gpu.bind()
		d.surf.release(d.pitchS)
		runtime.UnlockOSThread()
		d.pitchS = 0
	}
	d.capture = d.capture[:0] // the capture surfaces are the buffers' own, freed with them
	if d.fd >= 0 {
		d.reqbufs(bufTypeCapture, 0)
	}
	d.held = -1
}

func (d *Decoder) requeue(i int) error {
	d.bufArgs(bufTypeCapture, i, 2)
	return d.ioctl("VIDIOC_QBUF (picture)", vidiocQbuf, unsafe.Pointer(&d.a.buf))
}

// format is the layout Write gives pictures: NV12, lines of the width
// rounded up to even.
func (d *Decoder) format() sensors.Format {
	f := sensors.Format{Width: d.w, Height: d.h, Pixel: sensors.NV12}
	if f.Width%2 == 1 {
		f.Stride = f.Width + 1
	}
	return f
}

// Receive reports the next decoded picture. Right after a Send it waits
// (Options.Wait at most) for the engine to finish the access unit.
func (d *Decoder) Receive() (id uint64, f sensors.Format, ok bool, err error) {
	if d.closed {
		return 0, f, false, fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	if d.held >= 0 { // received, never written: back to the decoder
		i := d.held
		d.held = -1
		if err := d.requeue(i); err != nil {
			return 0, f, false, err
		}
	}
	if err := d.events(); err != nil {
		return 0, f, false, err
	}
	if !d.streamed {
		return 0, f, false, nil
	}
	deadline := time.Now().Add(d.wait)
	for {
		d.bufArgs(bufTypeCapture, 0, 2)
		err := d.dev.ioctl(d.fd, vidiocDqbuf, unsafe.Pointer(&d.a.buf))
		if err == nil {
			break
		}
		if errors.Is(err, syscall.EPIPE) {
			return 0, f, false, nil // the end of a drained stream
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return 0, f, false, fmt.Errorf("%w: VIDIOC_DQBUF (picture) on %s: %w", ErrDecode, d.node, err)
		}
		if d.inFlight <= 0 || time.Now().After(deadline) {
			return 0, f, false, nil
		}
		time.Sleep(200 * time.Microsecond)
	}
	b := d.a.buf[:]
	i := int(get32(b, bufIndex))
	if i < 0 || i >= len(d.capture) {
		return 0, f, false, fmt.Errorf("%w: the decoder returned picture buffer %d of %d", ErrDecode, i, len(d.capture))
	}
	if get32(b, bufFlags)&bufFlagLast != 0 && get32(d.a.planes[0][:], plBytesUsed) == 0 {
		d.requeue(i)
		return 0, f, false, nil
	}
	d.inFlight = max(d.inFlight-1, 0)
	d.held, d.heldErr = i, get32(b, bufFlags)&bufFlagError != 0
	d.heldID = get64(b, bufTimeSec)*1_000_000 + get64(b, bufTimeUsec)
	return d.heldID, d.format(), true, nil
}

// Write converts the picture Receive reported to pitch-linear NV12 and
// copies it into dst (host memory); corrupt: the decoder flagged it.
func (d *Decoder) Write(dst []byte) (bool, error) {
	f := d.format()
	if n := f.FrameSize(); len(dst) < n {
		return false, fmt.Errorf("%w: %d bytes for a %s picture of %d", sensors.ErrFormat, len(dst), f, n)
	}
	return d.write(0, unsafe.Pointer(unsafe.SliceData(dst)), f)
}

// WriteDevice is Write into n bytes the GPU addresses at dst (a frame
// slot's device address): the picture never passes through the host.
func (d *Decoder) WriteDevice(dst uintptr, n int) (bool, error) {
	f := d.format()
	if need := f.FrameSize(); n < need || dst == 0 {
		return false, fmt.Errorf("%w: %d bytes at %#x for a %s picture of %d", sensors.ErrFormat, n, dst, f, need)
	}
	return d.write(dst, nil, f)
}

func (d *Decoder) write(dst uintptr, host unsafe.Pointer, f sensors.Format) (bool, error) {
	if d.closed || d.held < 0 {
		return false, fmt.Errorf("%w: no picture received to write", ErrDecode)
	}
	i, corrupt := d.held, d.heldErr
	d.held = -1
	err := d.surf.convert(d.capture[i], d.pitchS, d.left, d.top, f.Width, f.Height)
	if qerr := d.requeue(i); err == nil {
		err = qerr
	}
	if err != nil {
		return false, fmt.Errorf("%w: NvBufSurfTransform: %w", ErrDecode, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.gpu.bind(); err != nil {
		return false, err
	}
	line := f.LineBytes()
	managed := dst != 0 && d.gpu.attach(dst, false) == nil
	err = d.gpu.copy2D(dst, host, line, d.y, d.pitch, f.Width, f.Height)
	if err == nil {
		off := line * f.Height
		cdst, chost := dst, host
		if dst != 0 {
			cdst += uintptr(off)
		} else {
			chost = unsafe.Add(host, off)
		}
		err = d.gpu.copy2D(cdst, chost, line, d.uv, d.pitch, 2*((f.Width+1)/2), (f.Height+1)/2)
	}
	if err == nil {
		err = d.gpu.sync()
	}
	if managed { // the slot back to the host, as umem hands it on
		if aerr := d.gpu.attach(dst, true); aerr == nil {
			aerr = d.gpu.sync()
		} else if err == nil {
			err = aerr
		}
	}
	if err != nil {
		return false, fmt.Errorf("%w: copying the picture out: %w", ErrDecode, err)
	}
	return corrupt, nil
}

// Drain tells the decoder the stream has ended (an empty bitstream
// buffer), so that Receive returns the pictures it still holds.
func (d *Decoder) Drain() error {
	if d.closed {
		return fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	if d.draining {
		return nil
	}
	i, err := d.freeOutput()
	if err != nil {
		return err
	}
	d.bufArgs(bufTypeOutput, i, 1)
	if err := d.ioctl("VIDIOC_QBUF (end of stream)", vidiocQbuf, unsafe.Pointer(&d.a.buf)); err != nil {
		return err
	}
	d.out[i].busy = true
	d.draining = true
	return d.events()
}

// Close stops both planes, frees the buffers and surfaces and closes the
// node; it is idempotent.
func (d *Decoder) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	if d.fd >= 0 {
		d.releaseCapture()
		d.streamOff(bufTypeOutput)
		for _, o := range d.out {
			d.dev.munmap(o.mem)
		}
		d.out = nil
		d.reqbufs(bufTypeOutput, 0)
		d.dev.close(d.fd)
		d.fd = -1
	}
	d.gpu.close()
	return nil
}
