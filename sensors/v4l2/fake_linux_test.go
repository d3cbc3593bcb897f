//go:build amd64 || arm64

package v4l2

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/sensors"
)

// event is one scripted outcome of a frame the fake camera completes.
type event struct {
	kind    eventKind
	data    []byte // payload (MJPEG); nil = fill with the sequence number
	seqSkip uint32 // frames the "driver" dropped before this one
	tsNs    int64  // timestamp to report; 0 = now
	unknown bool   // report V4L2_BUF_FLAG_TIMESTAMP_UNKNOWN
}

type eventKind int

const (
	evFrame  eventKind = iota
	evError            // V4L2_BUF_FLAG_ERROR
	evShort            // bytesused = half the image
	evUnplug           // device disappears: ENODEV, POLLHUP
	evEIO              // DQBUF fails with EIO
)

type fakeFmt struct {
	pix  sensors.PixelFormat
	w, h int
	fps  []uint32
}

type fakeBuf struct {
	queued  bool
	userptr uintptr
	length  uint32
	mem     []byte // MMAP memory
	mapped  bool
}

// fakeDev is a V4L2 device at the syscall boundary: it answers ioctls as
// a UVC driver would and signals readiness through a real pipe, so the
// source's poll(2) loop runs unchanged.
type fakeDev struct {
	mu sync.Mutex

	// configuration
	formats       []fakeFmt
	caps          uint32
	refuseUserptr bool                             // REQBUFS(USERPTR) -> EINVAL
	rejectQbuf    bool                             // QBUF(USERPTR) -> EFAULT
	padLines      int                              // extra bytes per line (stride)
	extraSize     int                              // bytes added to the sizeimage the driver reports
	mem           func(addr uintptr, n int) []byte // finds USERPTR memory
	auto          bool                             // endless good frames when the script is empty
	autoData      []byte                           // auto: every frame's payload (MJPEG); nil = the sequence number
	fill          bool                             // write the payload (benchmarks skip it)

	// state
	cur       pixFormat
	parm      fract
	memory    uint32
	bufs      []fakeBuf
	fifo      ring // queued buffer indices, in order (no allocation per frame)
	streaming bool
	gone      bool
	eio       bool
	script    []event
	seq       uint32
	r, w      int
	wbuf      [1]byte
	rbuf      [64]byte
	ready     bool
	closed    bool
	calls     map[uint]int
	unmapped  int
	mmaps     int
}

func newFakeDev(formats ...fakeFmt) *fakeDev {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		panic(err)
	}
	return &fakeDev{
		formats: formats, caps: capVideoCapture | capStreaming, fill: true,
		r: p[0], w: p[1], calls: map[uint]int{},
	}
}

// push appends scripted events.
func (d *fakeDev) push(ev ...event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.script = append(d.script, ev...)
	d.update()
}

func (d *fakeDev) count(req uint) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[req]
}

// update keeps the pipe readable exactly when a DQBUF would succeed (or
// fail in a scripted way).
func (d *fakeDev) update() {
	if d.gone || d.closed {
		return
	}
	if len(d.script) > 0 && d.script[0].kind == evUnplug {
		// The device vanishes: the kernel wakes pollers with POLLHUP and
		// every ioctl says ENODEV from now on.
		d.gone = true
		if d.ready {
			unix.Read(d.r, d.rbuf[:])
			d.ready = false
		}
		unix.Close(d.w)
		d.w = -1
		return
	}
	want := d.streaming && d.fifo.n > 0 && (len(d.script) > 0 || d.auto)
	if len(d.script) > 0 && d.script[0].kind == evEIO && d.streaming {
		want = true
	}
	if want && !d.ready {
		unix.Write(d.w, d.wbuf[:])
		d.ready = true
	} else if !want && d.ready {
		unix.Read(d.r, d.rbuf[:])
		d.ready = false
	}
}

func (d *fakeDev) find(pix uint32) *fakeFmt {
	for i := range d.formats {
		if uint32(d.formats[i].pix) == pix {
			return &d.formats[i]
		}
	}
	return nil
}

func (d *fakeDev) sizeimage() int {
	f := sensors.Format{Width: int(d.cur.Width), Height: int(d.cur.Height), Pixel: sensors.PixelFormat(d.cur.Pixelformat), Stride: int(d.cur.Bytesperline)}
	return f.FrameSize() + d.extraSize
}

func (d *fakeDev) ioctl(req uint, arg unsafe.Pointer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[req]++
	if d.gone {
		return unix.ENODEV
	}
	defer d.update()
	switch req {
	case vidiocQuerycap:
		c := (*capability)(arg)
		*c = capability{Capabilities: d.caps | capDeviceCaps, Device_caps: d.caps}
		copy(c.Driver[:], "fakevideo")
		copy(c.Card[:], "Fake Camera")
	case vidiocEnumFmt:
		f := (*fmtDesc)(arg)
		if int(f.Index) >= len(d.formats) {
			return unix.EINVAL
		}
		p := d.formats[f.Index].pix
		f.Pixelformat = uint32(p)
		copy(f.Description[:], p.String())
		if p == sensors.MJPEG {
			f.Flags = fmtFlagCompressed
		}
	case vidiocEnumFramesizes:
		e := (*frmSizeEnum)(arg)
		f := d.find(e.Format)
		if f == nil || e.Index > 0 {
			return unix.EINVAL
		}
		e.Type = frmsizeTypeDiscrete
		e.Discrete = frmSizeDiscrete{Width: uint32(f.w), Height: uint32(f.h)}
	case vidiocEnumFrameintervals:
		e := (*frmIvalEnum)(arg)
		f := d.find(e.Format)
		if f == nil || int(e.Index) >= len(f.fps) {
			return unix.EINVAL
		}
		e.Type = frmivalTypeDiscrete
		e.Discrete = fract{Numerator: 1, Denominator: f.fps[e.Index]}
	case vidiocSFmt, vidiocGFmt:
		fm := (*format)(arg)
		p := fm.pix()
		if req == vidiocSFmt {
			if d.streaming || len(d.bufs) > 0 {
				return unix.EBUSY
			}
			f := d.find(p.Pixelformat)
			if f == nil {
				f = &d.formats[0]
			}
			// A driver snaps to the size it has.
			d.cur = pixFormat{Width: uint32(f.w), Height: uint32(f.h), Pixelformat: uint32(f.pix), Field: fieldNone}
			d.cur.Bytesperline = uint32(f.pix.PackedLine(f.w) + d.padLines)
			if f.pix == sensors.MJPEG {
				d.cur.Bytesperline = 0
			}
			d.cur.Sizeimage = uint32(d.sizeimage())
			if len(f.fps) > 0 {
				d.parm = fract{Numerator: 1, Denominator: f.fps[0]}
			}
		}
		*p = d.cur
	case vidiocGParm, vidiocSParm:
		sp := (*streamParm)(arg)
		c := sp.capture()
		if req == vidiocSParm {
			f := d.find(d.cur.Pixelformat)
			// Snap to the nearest offered rate.
			want := float64(c.Timeperframe.Denominator) / float64(max(1, c.Timeperframe.Numerator))
			best := f.fps[0]
			for _, r := range f.fps {
				if abs(float64(r)-want) < abs(float64(best)-want) {
					best = r
				}
			}
			d.parm = fract{Numerator: 1, Denominator: best}
		}
		*c = captureParm{Capability: capTimePerFrame, Timeperframe: d.parm}
	case vidiocReqbufs:
		rb := (*requestBuffers)(arg)
		if rb.Memory == memoryUserptr && d.refuseUserptr {
			return unix.EINVAL
		}
		if d.streaming {
			return unix.EBUSY
		}
		for _, b := range d.bufs {
			if b.mapped && rb.Count == 0 {
				return unix.EBUSY
			}
		}
		d.bufs, d.fifo, d.memory = nil, ring{}, rb.Memory
		if rb.Count > 0 {
			d.bufs = make([]fakeBuf, min(rb.Count, 8))
			rb.Count = uint32(len(d.bufs))
			if rb.Memory == memoryMmap {
				for i := range d.bufs {
					d.bufs[i].mem = make([]byte, d.sizeimage())
				}
			}
		}
		rb.Capabilities = 1 | bufCapSupportsUserptr
	case vidiocQuerybuf:
		b := (*buffer)(arg)
		if int(b.Index) >= len(d.bufs) || d.memory != memoryMmap {
			return unix.EINVAL
		}
		binary.LittleEndian.PutUint32(b.M[:], uint32(b.Index)<<12)
		b.Length = uint32(len(d.bufs[b.Index].mem))
	case vidiocQbuf:
		b := (*buffer)(arg)
		if int(b.Index) >= len(d.bufs) || b.Memory != d.memory || d.bufs[b.Index].queued {
			return unix.EINVAL
		}
		fb := &d.bufs[b.Index]
		if d.memory == memoryUserptr {
			if d.rejectQbuf {
				return unix.EFAULT
			}
			if b.userptr() == 0 || b.Length < uint32(d.sizeimage()) {
				return unix.EINVAL
			}
			fb.userptr, fb.length = b.userptr(), b.Length
		}
		fb.queued = true
		d.fifo.push(int(b.Index))
	case vidiocDqbuf:
		return d.dqbuf((*buffer)(arg))
	case vidiocStreamon:
		d.streaming = true
	case vidiocStreamoff:
		d.streaming = false
		for i := range d.bufs {
			d.bufs[i].queued = false
		}
		d.fifo = ring{}
	default:
		return unix.ENOTTY
	}
	return nil
}

type ring struct {
	a    [8]int
	h, n int
}

func (r *ring) push(i int) { r.a[(r.h+r.n)%len(r.a)] = i; r.n++ }
func (r *ring) pop() int {
	i := r.a[r.h]
	r.h = (r.h + 1) % len(r.a)
	r.n--
	return i
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func (d *fakeDev) dqbuf(b *buffer) error {
	if !d.streaming {
		return unix.EINVAL
	}
	var ev event
	switch {
	case len(d.script) > 0:
		ev = d.script[0]
		switch ev.kind {
		case evEIO:
			d.script = d.script[1:]
			return unix.EIO
		}
		if d.fifo.n == 0 {
			return unix.EAGAIN
		}
		d.script = d.script[1:]
	case d.auto && d.fifo.n > 0:
		ev.data = d.autoData
	default:
		return unix.EAGAIN
	}
	i := d.fifo.pop()
	fb := &d.bufs[i]
	fb.queued = false
	d.seq += ev.seqSkip
	size := d.sizeimage()
	var mem []byte
	if d.memory == memoryUserptr {
		mem = d.mem(fb.userptr, int(fb.length))
	} else {
		mem = fb.mem
	}
	n := size
	if ev.data != nil {
		n = copy(mem, ev.data)
	} else if d.fill {
		for j := range mem[:size] {
			mem[j] = byte(d.seq)
		}
	} else {
		mem[0] = byte(d.seq)
	}
	flags := uint32(bufFlagTimestampMonotonic)
	if ev.unknown {
		flags = bufFlagTimestampUnknown
	}
	switch ev.kind {
	case evError:
		flags |= bufFlagError
	case evShort:
		n = size / 2
	}
	ts := ev.tsNs
	if ts == 0 {
		ts = sensors.Now()
	}
	*b = buffer{
		Index: uint32(i), Type: bufTypeVideoCapture, Bytesused: uint32(n), Flags: flags, Field: fieldNone,
		Timestamp: timeval{Sec: ts / 1e9, Usec: ts % 1e9 / 1e3}, Sequence: d.seq, Memory: d.memory, Length: fb.length,
	}
	if d.memory == memoryUserptr {
		b.setUserptr(fb.userptr)
	}
	d.seq++
	return nil
}

func (d *fakeDev) mmap(offset int64, length int) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := int(offset >> 12)
	if i >= len(d.bufs) || length > len(d.bufs[i].mem) {
		return nil, unix.EINVAL
	}
	d.bufs[i].mapped = true
	d.mmaps++
	return d.bufs[i].mem[:length], nil
}

func (d *fakeDev) munmap(b []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.bufs {
		if d.bufs[i].mapped && unsafe.SliceData(d.bufs[i].mem) == unsafe.SliceData(b) {
			d.bufs[i].mapped = false
			d.unmapped++
			return nil
		}
	}
	return unix.EINVAL
}

func (d *fakeDev) fd() int { return d.r }

func (d *fakeDev) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return unix.EBADF
	}
	d.closed = true
	unix.Close(d.r)
	if d.w >= 0 {
		unix.Close(d.w)
	}
	return nil
}
