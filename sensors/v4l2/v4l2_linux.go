//go:build amd64 || arm64

package v4l2

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/internal/ctxmerge"
	"github.com/edged-dev/edged/sensors/internal/mjpeg"
)

// tryGetter is implemented by pools that can lease a slot without waiting
// (the daemon's umem adapter should). Without it, a non-waiting lease is a
// Get with an already-cancelled context.
type tryGetter interface {
	TryGet() (sensors.Slot, bool)
}

var doneCtx = func() context.Context {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	return c
}()

type vbuf struct {
	slot   sensors.Slot // USERPTR: the slot queued in this buffer
	mem    []byte       // MMAP: the mapping
	queued bool
}

type counters struct {
	starts, frames, corrupt, short, decode, timeouts, restarts, gone atomic.Uint64
}

// Source is a V4L2 camera. It implements sensors.Source.
type Source struct {
	opts Options
	open func(path string) (device, error)
	cnt  counters
	mj   *mjpeg.Decoder // MJPEG cameras

	// wakeMu guards the eventfd and the lifetime's cancel func, so Close
	// and context cancellation can wake a Next that holds mu.
	wakeMu   sync.Mutex
	wakeFd   int // -1 when closed
	stop     context.CancelFunc
	wakeBuf  [8]byte
	drainBuf [8]byte

	pacing atomic.Bool // Next is in poll(2), waiting for the camera's next frame (Pacing)

	// infoMu guards what Stats and Format report while Next holds mu.
	infoMu     sync.Mutex
	format     sensors.Format
	mode       string
	modeReason string
	node       string

	mu        sync.Mutex // serialises Start, Next and the teardown in Close
	started   bool
	failed    error // sticky: the device is gone until Close
	dev       device
	pool      sensors.SlotPool
	life      context.Context
	merger    *ctxmerge.Merger
	devPix    sensors.PixelFormat
	need      int // bytes a raw frame needs
	sizeimage int
	userptr   bool
	bufs      []vbuf
	queued    int
	streaming bool
	pollFds   [2]unix.PollFd
	timeoutMs int
	stalls    int // consecutive poll timeouts
	vb        buffer
	seqBase   uint64 // Seq of the first frame after STREAMON
	firstSeq  uint32
	haveFirst bool
	nextSeq   uint64
}

// New returns a camera source; Start opens the device.
func New(opts Options) (*Source, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Source{opts: o, open: openFileDevice, wakeFd: -1}
	if o.Pixel == sensors.MJPEG {
		mj, err := mjpeg.New(o.JPEG)
		if err != nil {
			return nil, fmt.Errorf("v4l2 camera %q: %w", o.Name, err)
		}
		s.mj = mj
	}
	return s, nil
}

// SetDecodeTarget tells an MJPEG camera the engine input it feeds (size
// and preprocess resize mode), so frames are decoded at the smallest DCT
// scale that covers it (frames then report Format.Downscale). It returns a
// line saying which decoder serves, the scale and why; "" for other
// formats.
func (s *Source) SetDecodeTarget(w, h int, resize string) string {
	if s.mj == nil {
		return ""
	}
	s.mj.SetDecodeTarget(w, h, resize)
	return s.mj.Describe(s.opts.Width, s.opts.Height)
}

// Name implements sensors.Source.
func (s *Source) Name() string { return s.opts.Name }

// Format implements sensors.Source: the format of delivered frames (for
// MJPEG cameras, RGB24, at the decode scale). Valid after Start.
func (s *Source) Format() sensors.Format {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	return s.format
}

// Mode is "userptr" or "mmap" after Start.
func (s *Source) Mode() string {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	return s.mode
}

// Stats returns the counters and the memory mode.
func (s *Source) Stats() Stats {
	s.infoMu.Lock()
	mode, reason, node := s.mode, s.modeReason, s.node
	s.infoMu.Unlock()
	return Stats{
		Mode: mode, ModeReason: reason, Device: node,
		Starts: s.cnt.starts.Load(), Frames: s.cnt.frames.Load(), Corrupt: s.cnt.corrupt.Load(),
		Short: s.cnt.short.Load(), Decode: s.cnt.decode.Load(), Timeouts: s.cnt.timeouts.Load(),
		Restarts: s.cnt.restarts.Load(), Gone: s.cnt.gone.Load(),
	}
}

func (s *Source) errorf(format string, a ...any) error {
	return fmt.Errorf("v4l2 camera %q: "+format, append([]any{s.opts.Name}, a...)...)
}

// resolve finds the device node for the configured path or name.
func (s *Source) resolve() (string, error) {
	d := s.opts.Device
	var candidates []string
	if strings.ContainsRune(d, '/') {
		candidates = []string{d}
	} else {
		r := s.opts.DevRoot
		candidates = []string{filepath.Join(r, "v4l", "by-id", d), filepath.Join(r, "v4l", "by-path", d), filepath.Join(r, d)}
	}
	for _, c := range candidates {
		p, err := filepath.EvalSymlinks(c)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", s.errorf("resolving %s: %w", c, err)
		}
	}
	return "", s.errorf("%w: %s (looked at %s); check the cable and ls -l %s/v4l/by-id", sensors.ErrNotFound, d, strings.Join(candidates, ", "), s.opts.DevRoot)
}

// Start implements sensors.Source: it opens and configures the device from
// scratch, queues its buffers and starts streaming. Slots of pool must
// hold Format().FrameSize() bytes; for USERPTR they must be page-aligned
// memory a device may write (umem slots, never the Go heap).
func (s *Source) Start(ctx context.Context, pool sensors.SlotPool) (err error) {
	if pool == nil {
		return s.errorf("Start without a slot pool")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return s.errorf("already started")
	}
	node, err := s.resolve()
	if err != nil {
		return err
	}
	dev, err := s.open(node)
	if err != nil {
		return s.openError(node, err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		dev.close()
		return s.errorf("eventfd: %w", err)
	}
	life, stop := context.WithCancel(context.Background())
	s.wakeMu.Lock()
	s.wakeFd, s.stop = efd, stop
	s.wakeMu.Unlock()
	s.dev, s.pool, s.life = dev, pool, life
	s.merger = ctxmerge.New(life, s.wake)
	s.failed, s.streaming, s.queued, s.stalls, s.haveFirst = nil, false, 0, 0, false
	s.pollFds = [2]unix.PollFd{{Fd: int32(dev.fd()), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	s.infoMu.Lock()
	s.node = node
	s.infoMu.Unlock()
	defer func() {
		if err != nil {
			s.teardown()
		}
	}()
	if err := s.checkCaps(node); err != nil {
		return err
	}
	if err := s.setFormat(node); err != nil {
		return err
	}
	if err := s.setupBuffers(ctx, node); err != nil {
		return err
	}
	if err := s.streamOn(); err != nil {
		return s.errorf("%s: STREAMON: %w", node, s.classify(err))
	}
	s.started = true
	s.cnt.starts.Add(1)
	return nil
}

func (s *Source) openError(node string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return s.errorf("%w: %s: %w", sensors.ErrNotFound, node, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return s.errorf("%s: %w; add the service user to group video", node, err)
	case errors.Is(err, unix.EBUSY):
		return s.errorf("%s: %w; another process is using the camera (fuser -v %s)", node, err, node)
	}
	return s.errorf("opening %s: %w", node, err)
}

// classify wraps errors that mean the device disappeared.
func (s *Source) classify(err error) error {
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("%w: %w", sensors.ErrDeviceGone, err)
	}
	return err
}

func (s *Source) checkCaps(node string) error {
	var c capability
	if err := s.dev.ioctl(vidiocQuerycap, unsafe.Pointer(&c)); err != nil {
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
			return s.errorf("%w: %s does not answer VIDIOC_QUERYCAP", ErrNotCapture, node)
		}
		return s.errorf("%s: VIDIOC_QUERYCAP: %w", node, s.classify(err))
	}
	caps := c.Capabilities
	if caps&capDeviceCaps != 0 {
		caps = c.Device_caps
	}
	if caps&capVideoCapture == 0 || caps&capStreaming == 0 {
		return s.errorf("%w: %s (%s, driver %s) has capabilities %#x; a UVC camera's capture node is usually the first of its /dev/video nodes", ErrNotCapture, node, cstr(c.Card[:]), cstr(c.Driver[:]), caps)
	}
	return nil
}

func (s *Source) setFormat(node string) error {
	o := s.opts
	offered, err := enumerate(s.dev)
	if err != nil {
		return s.errorf("%s: enumerating formats: %w", node, s.classify(err))
	}
	if !offered.has(o.Pixel) {
		return s.errorf("%w: %s does not offer %s; it offers %s", sensors.ErrFormat, node, o.Pixel, offered)
	}
	var f format
	f.Type = bufTypeVideoCapture
	p := f.pix()
	p.Width, p.Height, p.Pixelformat, p.Field = uint32(o.Width), uint32(o.Height), uint32(o.Pixel), fieldNone
	if err := s.dev.ioctl(vidiocSFmt, unsafe.Pointer(&f)); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return s.errorf("%s: VIDIOC_S_FMT: %w; another process is streaming from the camera", node, err)
		}
		return s.errorf("%w: %s: VIDIOC_S_FMT %dx%d %s: %w", sensors.ErrFormat, node, o.Width, o.Height, o.Pixel, s.classify(err))
	}
	if int(p.Width) != o.Width || int(p.Height) != o.Height || sensors.PixelFormat(p.Pixelformat) != o.Pixel {
		return s.errorf("%w: %s: asked for %dx%d %s, the driver offers %dx%d %s; it offers %s", sensors.ErrFormat, node, o.Width, o.Height, o.Pixel, p.Width, p.Height, sensors.PixelFormat(p.Pixelformat), offered)
	}
	s.devPix = o.Pixel
	delivered := sensors.Format{Width: o.Width, Height: o.Height, Pixel: o.Pixel}
	if o.Pixel == sensors.MJPEG {
		delivered.Pixel = sensors.RGB24 // at full scale: the slot size
	} else if bpl := int(p.Bytesperline); bpl > o.Pixel.PackedLine(o.Width) {
		delivered.Stride = bpl
	}
	s.sizeimage = int(p.Sizeimage)
	s.need = delivered.FrameSize()
	if limit := maxSizeimage(s.need); s.sizeimage > limit {
		// The frame size the driver asks for sizes its buffers (MMAP) and
		// the slots it needs: a driver that says 4 GiB for 640x480 is not
		// believed.
		return s.errorf("%w: %s: the driver reports frames of %d bytes for %dx%d %s, more than the %d such a frame can take", sensors.ErrFormat, node, s.sizeimage, o.Width, o.Height, o.Pixel, limit)
	}
	if o.Pixel != sensors.MJPEG && s.sizeimage > 0 && s.sizeimage < s.need {
		// Some drivers pad only the lines that need it; trust sizeimage.
		s.need = s.sizeimage
	}
	if s.sizeimage < s.need {
		s.sizeimage = s.need
	}
	delivered.FPS = s.setRate(o.FPS)
	s.timeoutMs = s.pollTimeout(delivered.FPS)
	if s.mj != nil {
		delivered = s.mj.Format(o.Width, o.Height, delivered.FPS)
	}
	s.infoMu.Lock()
	s.format = delivered
	s.infoMu.Unlock()
	return nil
}

// maxSizeimage is the largest sizeimage a driver may report for frames
// that take need bytes (raw: with the driver's line padding; MJPEG: as
// RGB24): twice that and 1 MiB, room for padding, metadata and JPEG
// frames larger than their pixels.
func maxSizeimage(need int) int { return 2*need + 1<<20 }

// setRate asks for fps when requested and returns the rate in effect (0
// when the driver does not say).
func (s *Source) setRate(fps float64) float64 {
	var p streamParm
	p.Type = bufTypeVideoCapture
	if err := s.dev.ioctl(vidiocGParm, unsafe.Pointer(&p)); err != nil {
		return fps
	}
	c := p.capture()
	if fps > 0 && c.Capability&capTimePerFrame != 0 {
		num, den := fraction(fps)
		c.Timeperframe = fract{Numerator: num, Denominator: den}
		if err := s.dev.ioctl(vidiocSParm, unsafe.Pointer(&p)); err != nil {
			return fps
		}
	}
	if t := c.Timeperframe; t.Numerator > 0 && t.Denominator > 0 {
		return float64(t.Denominator) / float64(t.Numerator)
	}
	return fps
}

// fraction turns a rate into a time-per-frame fraction: 30 -> 1/30,
// 29.97 -> 1000/29970.
func fraction(fps float64) (num, den uint32) {
	if fps == math.Trunc(fps) {
		return 1, uint32(fps)
	}
	return 1000, uint32(math.Round(fps * 1000))
}

func (s *Source) pollTimeout(fps float64) int {
	if s.opts.PollTimeout > 0 {
		return max(1, int(s.opts.PollTimeout/time.Millisecond))
	}
	if fps <= 0 {
		return 1000
	}
	return max(200, int(3000/fps))
}

func (s *Source) setMode(mode, reason string) {
	s.infoMu.Lock()
	s.mode, s.modeReason = mode, reason
	s.infoMu.Unlock()
}

func (s *Source) setupBuffers(ctx context.Context, node string) error {
	o := s.opts
	first, err := s.pool.Get(ctx)
	if err != nil {
		return s.errorf("leasing a frame slot: %w", err)
	}
	need := s.format.FrameSize()
	if s.mj != nil {
		need = s.need // a full-scale decode, whatever the decode target
	}
	if len(first.Bytes()) < need {
		first.Release()
		return s.errorf("slot of %d bytes cannot hold a %s frame of %d bytes: size the pool with Format().FrameSize()", len(first.Bytes()), s.format, need)
	}
	reason := ""
	switch {
	case o.Memory == MemoryMmap:
		first.Release()
		reason = "memory = mmap in the configuration"
	case s.devPix == sensors.MJPEG:
		first.Release()
		reason = "MJPEG frames are decoded from MMAP buffers into the slot"
	default:
		reason, err = s.tryUserptr(first, node)
		if err != nil {
			return err
		}
		if reason == "" {
			s.setMode(MemoryUserptr, "")
			return nil
		}
		if o.Memory == MemoryUserptr {
			return s.errorf("%w: %s: USERPTR streaming impossible (%s) and memory = userptr forbids the MMAP fallback", sensors.ErrFormat, node, reason)
		}
	}
	if err := s.setupMmap(node); err != nil {
		return err
	}
	s.setMode(MemoryMmap, reason)
	return nil
}

// leaseNow leases a slot without waiting; ok is false when none is free.
func (s *Source) leaseNow() (sensors.Slot, bool) {
	if t, ok := s.pool.(tryGetter); ok {
		return t.TryGet()
	}
	sl, err := s.pool.Get(doneCtx)
	return sl, err == nil
}

func (s *Source) checkSlot(sl sensors.Slot) string {
	b := sl.Bytes()
	if len(b) < s.sizeimage {
		return fmt.Sprintf("a slot of %d bytes is smaller than the driver's frame of %d bytes", len(b), s.sizeimage)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(os.Getpagesize()) != 0 {
		return "slot memory is not page-aligned"
	}
	return ""
}

// tryUserptr sets up USERPTR streaming. It returns a non-empty reason when
// USERPTR is not possible and everything was undone for the MMAP path.
func (s *Source) tryUserptr(first sensors.Slot, node string) (string, error) {
	if why := s.checkSlot(first); why != "" {
		first.Release()
		return why, nil
	}
	rb := requestBuffers{Count: uint32(s.opts.Buffers), Type: bufTypeVideoCapture, Memory: memoryUserptr}
	if err := s.dev.ioctl(vidiocReqbufs, unsafe.Pointer(&rb)); err != nil {
		first.Release()
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
			return fmt.Sprintf("driver refused USERPTR (REQBUFS: %v)", err), nil
		}
		return "", s.errorf("%s: VIDIOC_REQBUFS userptr: %w", node, s.classify(err))
	}
	if rb.Count == 0 {
		first.Release()
		return "driver granted no USERPTR buffers", nil
	}
	s.userptr = true
	s.bufs = make([]vbuf, rb.Count)
	s.bufs[0].slot = first
	// Queue every buffer we can fill now; the first QBUF is the test of
	// whether the driver accepts this memory.
	for i := range s.bufs {
		if s.bufs[i].slot == nil {
			sl, ok := s.leaseNow()
			if !ok {
				continue
			}
			if why := s.checkSlot(sl); why != "" {
				sl.Release()
				continue
			}
			s.bufs[i].slot = sl
		}
		if err := s.qbuf(i); err != nil {
			if errors.Is(err, unix.ENODEV) {
				return "", s.errorf("%s: VIDIOC_QBUF: %w", node, s.classify(err))
			}
			s.freeUserptr()
			return fmt.Sprintf("driver rejected USERPTR memory (QBUF: %v)", err), nil
		}
	}
	return "", nil
}

// freeUserptr undoes tryUserptr: buffers freed, slots released.
func (s *Source) freeUserptr() {
	s.dev.ioctl(vidiocStreamoff, unsafe.Pointer(&[1]uint32{bufTypeVideoCapture}))
	rb := requestBuffers{Count: 0, Type: bufTypeVideoCapture, Memory: memoryUserptr}
	s.dev.ioctl(vidiocReqbufs, unsafe.Pointer(&rb))
	for i := range s.bufs {
		if s.bufs[i].slot != nil {
			s.bufs[i].slot.Release()
		}
	}
	s.bufs, s.queued, s.userptr = nil, 0, false
}

func (s *Source) setupMmap(node string) error {
	rb := requestBuffers{Count: uint32(s.opts.Buffers), Type: bufTypeVideoCapture, Memory: memoryMmap}
	if err := s.dev.ioctl(vidiocReqbufs, unsafe.Pointer(&rb)); err != nil {
		return s.errorf("%s: VIDIOC_REQBUFS mmap: %w", node, s.classify(err))
	}
	if rb.Count == 0 {
		return s.errorf("%s: the driver granted no MMAP buffers", node)
	}
	s.userptr = false
	s.bufs = make([]vbuf, rb.Count)
	for i := range s.bufs {
		var b buffer
		b.Index, b.Type, b.Memory = uint32(i), bufTypeVideoCapture, memoryMmap
		if err := s.dev.ioctl(vidiocQuerybuf, unsafe.Pointer(&b)); err != nil {
			return s.errorf("%s: VIDIOC_QUERYBUF %d: %w", node, i, s.classify(err))
		}
		mem, err := s.dev.mmap(int64(b.offset()), int(b.Length))
		if err != nil {
			return s.errorf("%s: mmap of buffer %d (%d bytes): %w", node, i, b.Length, s.classify(err))
		}
		s.bufs[i].mem = mem
		if err := s.qbuf(i); err != nil {
			return s.errorf("%s: VIDIOC_QBUF %d: %w", node, i, s.classify(err))
		}
	}
	return nil
}

// qbuf queues buffer i (with its slot, for USERPTR).
func (s *Source) qbuf(i int) error {
	b := &s.vb
	*b = buffer{Index: uint32(i), Type: bufTypeVideoCapture, Field: fieldNone}
	if s.userptr {
		mem := s.bufs[i].slot.Bytes()
		b.Memory = memoryUserptr
		b.setUserptr(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
		b.Length = uint32(len(mem))
	} else {
		b.Memory = memoryMmap
	}
	if err := s.dev.ioctl(vidiocQbuf, unsafe.Pointer(b)); err != nil {
		return err
	}
	s.bufs[i].queued = true
	s.queued++
	return nil
}

func (s *Source) streamOn() error {
	t := uint32(bufTypeVideoCapture)
	if err := s.dev.ioctl(vidiocStreamon, unsafe.Pointer(&t)); err != nil {
		return err
	}
	s.streaming = true
	s.haveFirst = false
	return nil
}

// refill queues every idle buffer it can. In USERPTR mode it waits for a
// slot only when nothing at all is queued (poll would report an error on
// an empty queue); otherwise it takes what the pool has free now and the
// driver runs on fewer buffers meanwhile.
func (s *Source) refill(ctx context.Context) error {
	for i := range s.bufs {
		v := &s.bufs[i]
		if v.queued {
			continue
		}
		if s.userptr && v.slot == nil {
			sl, ok := s.leaseNow()
			if !ok && s.queued == 0 {
				var err error
				if sl, err = s.pool.Get(ctx); err != nil {
					return err
				}
				ok = true
			}
			if !ok {
				continue
			}
			if why := s.checkSlot(sl); why != "" {
				sl.Release()
				return s.errorf("%w: USERPTR slot unusable: %s", sensors.ErrFormat, why)
			}
			v.slot = sl
		}
		if err := s.qbuf(i); err != nil {
			return s.classify(err)
		}
	}
	return nil
}

// wake interrupts a poll in Next. It runs from Close and from the
// merger's AfterFunc when a caller's context ends.
func (s *Source) wake() {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if s.wakeFd >= 0 {
		s.wakeBuf = [8]byte{1}
		unix.Write(s.wakeFd, s.wakeBuf[:])
	}
}

// WorkBytes is the memory the source allocates besides its frame slots,
// at most: for MJPEG, what decoding a frame takes (the driver's own
// buffers, in MMAP mode, are the kernel's).
func (s *Source) WorkBytes() int64 {
	if s.mj == nil {
		return 0
	}
	return s.mj.WorkBytes(s.opts.Width, s.opts.Height)
}

// Pacing implements sensors.Pacer: Next is in poll(2) waiting for the
// camera's next frame. The poll has a timeout of three frame periods
// (at least 200 ms); timeouts restart the stream and, after
// Options.GiveUpAfter of them, the camera counts as gone, so the wait
// always ends by itself.
func (s *Source) Pacing() bool { return s.pacing.Load() }

// Next implements sensors.Source.
func (s *Source) Next(ctx context.Context) (sensors.Frame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return sensors.Frame{}, s.errorf("%w", sensors.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return sensors.Frame{}, err
	}
	if s.failed != nil {
		return sensors.Frame{}, s.failed
	}
	mctx := s.merger.Context(ctx)
	for {
		if err := s.refill(mctx); err != nil {
			return sensors.Frame{}, s.ended(ctx, err)
		}
		s.pacing.Store(true)
		n, err := unix.Poll(s.pollFds[:], s.timeoutMs)
		s.pacing.Store(false)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return sensors.Frame{}, s.errorf("poll: %w", err)
		}
		if s.pollFds[1].Revents != 0 {
			unix.Read(int(s.pollFds[1].Fd), s.drainBuf[:])
			if ctx.Err() != nil || s.life.Err() != nil {
				return sensors.Frame{}, s.ended(ctx, nil)
			}
		}
		if n == 0 {
			if err := s.stalled(); err != nil {
				return sensors.Frame{}, err
			}
			continue
		}
		re := s.pollFds[0].Revents
		if re == 0 {
			continue
		}
		if re&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 && re&unix.POLLIN == 0 {
			// Ask the driver why; an unplugged device says ENODEV.
			err := s.dqbuf()
			if err == nil {
				err = unix.EIO
			}
			return sensors.Frame{}, s.gone(fmt.Errorf("poll revents %#x: %w", re, err))
		}
		if err := s.dqbuf(); err != nil {
			if err == unix.EAGAIN {
				continue
			}
			return sensors.Frame{}, s.gone(err)
		}
		s.stalls = 0
		f, ok, err := s.deliver(mctx)
		if err != nil {
			return sensors.Frame{}, s.ended(ctx, err)
		}
		if ok {
			return f, nil
		}
	}
}

// ended maps an error seen while the lifetime or ctx may have ended.
func (s *Source) ended(ctx context.Context, err error) error {
	switch {
	case s.life.Err() != nil:
		return s.errorf("%w", sensors.ErrClosed)
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, sensors.ErrDeviceGone):
		return s.gone(err)
	}
	return s.errorf("%w", err)
}

// gone records that the device disappeared (or failed beyond repair); Next
// keeps returning the error until Close.
func (s *Source) gone(err error) error {
	if !errors.Is(err, sensors.ErrDeviceGone) {
		err = fmt.Errorf("%w: %w", sensors.ErrDeviceGone, err)
	}
	s.cnt.gone.Add(1)
	s.failed = s.errorf("%s: %w; Close and Start again to reconnect", s.node, err)
	return s.failed
}

func (s *Source) stalled() error {
	s.cnt.timeouts.Add(1)
	s.stalls++
	if s.stalls >= s.opts.GiveUpAfter {
		return s.gone(fmt.Errorf("no frame for %d polls of %d ms", s.stalls, s.timeoutMs))
	}
	if s.stalls%s.opts.RestartAfter == 0 {
		s.cnt.restarts.Add(1)
		return s.restart()
	}
	return nil
}

// restart cycles STREAMOFF/STREAMON; buffers keep their slots and are
// queued again.
func (s *Source) restart() error {
	t := uint32(bufTypeVideoCapture)
	if err := s.dev.ioctl(vidiocStreamoff, unsafe.Pointer(&t)); err != nil {
		return s.gone(fmt.Errorf("STREAMOFF: %w", err))
	}
	s.streaming = false
	for i := range s.bufs {
		s.bufs[i].queued = false
	}
	s.queued = 0
	s.seqBase = s.nextSeq
	if err := s.refill(s.life); err != nil {
		return s.gone(fmt.Errorf("requeue after restart: %w", err))
	}
	if err := s.streamOn(); err != nil {
		return s.gone(fmt.Errorf("STREAMON: %w", err))
	}
	return nil
}

// dqbuf dequeues one buffer into s.vb.
func (s *Source) dqbuf() error {
	b := &s.vb
	*b = buffer{Type: bufTypeVideoCapture, Memory: memoryMmap}
	if s.userptr {
		b.Memory = memoryUserptr
	}
	err := s.dev.ioctl(vidiocDqbuf, unsafe.Pointer(b))
	if err != nil {
		return err
	}
	if int(b.Index) >= len(s.bufs) {
		return fmt.Errorf("driver returned buffer index %d of %d", b.Index, len(s.bufs))
	}
	s.bufs[b.Index].queued = false
	s.queued--
	return nil
}

// deliver turns the dequeued buffer into a frame, or requeues it when it
// must be dropped (ok false).
func (s *Source) deliver(ctx context.Context) (sensors.Frame, bool, error) {
	b := &s.vb
	i := int(b.Index)
	v := &s.bufs[i]
	n := int(b.Bytesused)
	if b.Flags&bufFlagError != 0 {
		s.cnt.corrupt.Add(1)
		return sensors.Frame{}, false, s.requeue(i)
	}
	if n == 0 || (s.devPix != sensors.MJPEG && n < s.need) {
		s.cnt.short.Add(1)
		return sensors.Frame{}, false, s.requeue(i)
	}
	t := sensors.Now()
	if b.Flags&bufFlagTimestampMask == bufFlagTimestampMonotonic {
		if ts := b.Timestamp.Sec*1e9 + b.Timestamp.Usec*1e3; ts > 0 {
			t = ts
		}
	}
	if !s.haveFirst {
		s.haveFirst, s.firstSeq, s.seqBase = true, b.Sequence, s.nextSeq
	}
	seq := s.seqBase + uint64(b.Sequence-s.firstSeq)
	s.nextSeq = seq + 1
	f := sensors.Frame{Seq: seq, TCapture: t, TReady: sensors.Now(), Format: s.format}
	if s.userptr {
		f.Slot, f.BytesUsed = v.slot, min(n, s.need)
		v.slot = nil
		s.cnt.frames.Add(1)
		return f, true, nil
	}
	sl, err := s.pool.Get(ctx)
	if err != nil {
		s.requeue(i)
		return sensors.Frame{}, false, err
	}
	data := v.mem[:min(n, len(v.mem))]
	if s.devPix == sensors.MJPEG {
		df, used, err := s.mj.Decode(sl.Bytes(), data, s.opts.Width, s.opts.Height, s.format.FPS)
		if err != nil {
			// Corrupt or truncated: never pass a torn image on.
			sl.Release()
			s.cnt.decode.Add(1)
			return sensors.Frame{}, false, s.requeue(i)
		}
		if df != s.format { // the decode target changed
			s.infoMu.Lock()
			s.format = df
			s.infoMu.Unlock()
		}
		f.Format, f.BytesUsed = df, used
	} else {
		f.BytesUsed = copy(sl.Bytes(), data[:min(len(data), s.need)])
	}
	f.Slot, f.Flags, f.TReady = sl, sensors.FlagCopied, sensors.Now() // the copy (or decode) is part of the fill
	if err := s.requeue(i); err != nil {
		sl.Release()
		return sensors.Frame{}, false, err
	}
	s.cnt.frames.Add(1)
	return f, true, nil
}

func (s *Source) requeue(i int) error {
	if err := s.qbuf(i); err != nil {
		return s.classify(err)
	}
	return nil
}

// Close implements sensors.Source: it wakes a blocked Next, stops
// streaming, unmaps and frees the buffers, closes the device and releases
// every slot still queued, in that order, so no DMA can reach a slot after
// it is back in the pool. It is idempotent; Start may follow.
func (s *Source) Close() error {
	s.wakeMu.Lock()
	stop := s.stop
	s.wakeMu.Unlock()
	if stop != nil {
		stop()
	}
	s.wake()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	return s.teardown()
}

// teardown releases everything Start acquired; it tolerates a device that
// is already gone.
func (s *Source) teardown() error {
	var errs []error
	if s.mj != nil {
		s.mj.Close() // the next Start's first frame makes a new one
	}
	if s.dev != nil {
		t := uint32(bufTypeVideoCapture)
		if s.streaming {
			if err := s.dev.ioctl(vidiocStreamoff, unsafe.Pointer(&t)); err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("STREAMOFF: %w", err))
			}
			s.streaming = false
		}
		for i := range s.bufs {
			if m := s.bufs[i].mem; m != nil {
				if err := s.dev.munmap(m); err != nil {
					errs = append(errs, fmt.Errorf("munmap: %w", err))
				}
				s.bufs[i].mem = nil
			}
		}
		if s.bufs != nil {
			rb := requestBuffers{Type: bufTypeVideoCapture, Memory: memoryMmap}
			if s.userptr {
				rb.Memory = memoryUserptr
			}
			s.dev.ioctl(vidiocReqbufs, unsafe.Pointer(&rb)) // frees driver buffers; fails harmlessly when gone
		}
		if err := s.dev.close(); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
		s.dev = nil
	}
	for i := range s.bufs {
		if s.bufs[i].slot != nil {
			s.bufs[i].slot.Release()
			s.bufs[i].slot = nil
		}
	}
	s.bufs, s.queued, s.userptr = nil, 0, false
	if s.merger != nil {
		s.merger.Release()
		s.merger = nil
	}
	s.wakeMu.Lock()
	if s.wakeFd >= 0 {
		unix.Close(s.wakeFd)
		s.wakeFd = -1
	}
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	s.wakeMu.Unlock()
	s.pool = nil
	if err := errors.Join(errs...); err != nil {
		return s.errorf("closing %s: %w", s.node, err)
	}
	return nil
}
