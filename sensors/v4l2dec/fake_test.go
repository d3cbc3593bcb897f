package v4l2dec

import (
	"bytes"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/edged-dev/edged/sensors/h26x"
)

// fakeDecoder is the Jetson decoder at its boundary, as NVIDIA's
// documentation and the jetson_multimedia_api samples describe it: libv4l2
// on the decoder node (formats, controls, events, two planes of MMAP
// buffers, the dmabuf of each capture buffer) and NvBufSurface (wrapping a
// dmabuf, a pitch-linear surface, the block- to pitch-linear transform,
// the mapping for CUDA). It "decodes" synchronously: a queued access unit
// is parsed with h26x, the first SPS (and every other size) raises
// RESOLUTION_CHANGE, and every picture, once a capture buffer is queued,
// comes back with the bitstream buffer's timestamp. A surface's content is
// the timestamp of the picture in it, which the fake GPU turns into the
// bytes the test expects. Failures are injected by field.
type fakeDecoder struct {
	nodes  map[string]bool
	codec  h26x.Codec
	opened bool

	ctrls      map[uint32]int32
	subscribed bool
	outMem     [][]byte
	outStream  bool
	outDone    []int // dequeueable bitstream buffers
	outFlags   map[int]uint32

	lastSPS       []byte
	w, h          int // the stream's current size
	capW, capH    int // what the capture plane is set up for
	events        []uint32
	pending       []picture // decoded, waiting for a capture buffer
	capN          int
	capQueued     []int
	capStream     bool
	capContent    map[int]picture
	eos, sentLast bool

	surfaces map[uintptr]*fakeSurface
	nextSurf uintptr

	// failures
	failOpen    syscall.Errno
	errorTS     map[uint64]bool // pictures flagged V4L2_BUF_FLAG_ERROR
	brokenTS    map[uint64]bool // bitstream buffers flagged broken
	failConvert bool
	failCUDA    bool
	counts      map[string]int
}

type picture struct {
	ts   uint64
	w, h int
	err  bool
}

type fakeSurface struct {
	w, h  int
	pitch int
	pic   picture
	base  uintptr
	dmabf bool
}

func newFake(c h26x.Codec) *fakeDecoder {
	return &fakeDecoder{nodes: map[string]bool{"/dev/v4l2-nvdec": true}, codec: c, ctrls: map[uint32]int32{},
		outFlags: map[int]uint32{}, capContent: map[int]picture{}, surfaces: map[uintptr]*fakeSurface{}, nextSurf: 1,
		errorTS: map[uint64]bool{}, brokenTS: map[uint64]bool{}, counts: map[string]int{}}
}

// deref reads an address an ioctl argument holds (a pointer the ABI puts
// inside a structure).
func deref(addr uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

func bytesAt(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

func (f *fakeDecoder) open(node string) (int, error) {
	if f.failOpen != 0 {
		return -1, f.failOpen
	}
	if !f.nodes[node] {
		return -1, syscall.ENOENT
	}
	if f.opened {
		return -1, syscall.EBUSY
	}
	f.opened = true
	return 3, nil
}

func (f *fakeDecoder) close(fd int) error {
	if fd != 3 || !f.opened {
		return syscall.EBADF
	}
	f.opened = false
	return nil
}

func (f *fakeDecoder) mmap(fd int, offset int64, n int) ([]byte, error) {
	i := int(offset >> 20)
	if fd != 3 || i >= len(f.outMem) || n != len(f.outMem[i]) {
		return nil, syscall.EINVAL
	}
	return f.outMem[i], nil
}

func (f *fakeDecoder) munmap([]byte) error { return nil }

func (f *fakeDecoder) ioctl(fd int, req uint, arg unsafe.Pointer) error {
	if fd != 3 || !f.opened {
		return syscall.EBADF
	}
	switch req {
	case vidiocSFmt:
		b := bytesAt(arg, formatSize)
		want := pixH264
		if f.codec == h26x.H265 {
			want = pixH265
		}
		if get32(b, fmtType) != bufTypeOutput || get32(b, fmtPixel) != want || get32(b, fmtPlane0Size) == 0 || b[fmtNumPlanes] != 1 {
			return syscall.EINVAL
		}
	case vidiocSExtCtrls:
		b := bytesAt(arg, extCtrlsSize)
		if get32(b, ecClass) != ctrlClassMPEG || get32(b, ecCount) != 1 {
			return syscall.EINVAL
		}
		c := bytesAt(deref(get64(b, ecControls)), extCtrlSize)
		switch id := get32(c, ecID); id {
		case cidDisableCompleteFrameInput, cidErrorReporting:
			f.ctrls[id] = int32(get32(c, ecValue))
		default:
			return syscall.EINVAL
		}
	case vidiocSubscribeEvent:
		if get32(bytesAt(arg, subSize), subType) != eventResolutionChange {
			return syscall.EINVAL
		}
		f.subscribed = true
	case vidiocReqbufs:
		return f.reqbufs(bytesAt(arg, reqbufsSize))
	case vidiocQuerybuf:
		b := bytesAt(arg, bufferSize)
		i := int(get32(b, bufIndex))
		if get32(b, bufType) != bufTypeOutput || i >= len(f.outMem) {
			return syscall.EINVAL
		}
		p := bytesAt(deref(get64(b, bufPlanes)), planeSize)
		set32(p, plLength, uint32(len(f.outMem[i])))
		set32(p, plMemOffset, uint32(i<<20))
	case vidiocStreamon, vidiocStreamoff:
		on := req == vidiocStreamon
		switch get32(bytesAt(arg, 4), 0) {
		case bufTypeOutput:
			f.outStream = on
		case bufTypeCapture:
			f.capStream = on
			if !on {
				f.capQueued = nil
			}
		default:
			return syscall.EINVAL
		}
	case vidiocQbuf:
		return f.qbuf(bytesAt(arg, bufferSize))
	case vidiocDqbuf:
		return f.dqbuf(bytesAt(arg, bufferSize))
	case vidiocDqevent:
		if len(f.events) == 0 {
			return syscall.ENOENT
		}
		set32(bytesAt(arg, eventSize), evType, f.events[0])
		f.events = f.events[1:]
	case vidiocGFmt:
		b := bytesAt(arg, formatSize)
		if get32(b, fmtType) != bufTypeCapture || f.w == 0 {
			return syscall.EINVAL
		}
		set32(b, fmtWidth, uint32((f.w+15)&^15))
		set32(b, fmtHeight, uint32((f.h+15)&^15))
		set32(b, fmtPixel, pixNV12M)
		b[fmtNumPlanes] = 2
	case vidiocGCrop:
		b := bytesAt(arg, cropSize)
		if get32(b, cropType) != bufTypeCapture || f.w == 0 {
			return syscall.EINVAL
		}
		set32(b, cropWidth, uint32(f.w))
		set32(b, cropHeight, uint32(f.h))
	case vidiocGCtrl:
		b := bytesAt(arg, controlSize)
		if get32(b, ctrlID) != cidMinBuffersForCapture {
			return syscall.EINVAL
		}
		set32(b, ctrlValue, 3)
	case vidiocExpbuf:
		b := bytesAt(arg, expbufSize)
		i := int(get32(b, expIndex))
		if get32(b, expType) != bufTypeCapture || i >= f.capN {
			return syscall.EINVAL
		}
		set32(b, expFd, uint32(100+i))
	default:
		return syscall.ENOTTY
	}
	return nil
}

func (f *fakeDecoder) reqbufs(b []byte) error {
	n := int(get32(b, rbCount))
	if get32(b, rbMemory) != memoryMMAP {
		return syscall.EINVAL
	}
	switch get32(b, rbType) {
	case bufTypeOutput:
		if f.outStream {
			return syscall.EBUSY
		}
		f.outMem = nil
		for range min(n, outputBuffers) {
			f.outMem = append(f.outMem, make([]byte, 1<<20))
		}
		set32(b, rbCount, uint32(len(f.outMem)))
	case bufTypeCapture:
		if f.capStream {
			return syscall.EBUSY
		}
		if n > 0 && f.w == 0 {
			return syscall.EINVAL // no resolution yet
		}
		f.capN, f.capQueued = n, nil
		for s, sf := range f.surfaces {
			if sf.dmabf {
				delete(f.surfaces, s)
			}
		}
		f.capW, f.capH = f.w, f.h
		set32(b, rbCount, uint32(n))
		f.counts["capture setups"] += min(n, 1)
	default:
		return syscall.EINVAL
	}
	return nil
}

func (f *fakeDecoder) qbuf(b []byte) error {
	i := int(get32(b, bufIndex))
	p := bytesAt(deref(get64(b, bufPlanes)), planeSize)
	switch get32(b, bufType) {
	case bufTypeOutput:
		if !f.outStream || i >= len(f.outMem) {
			return syscall.EINVAL
		}
		ts := get64(b, bufTimeSec)*1_000_000 + get64(b, bufTimeUsec)
		n := int(get32(p, plBytesUsed))
		if n == 0 {
			f.eos = true
		} else {
			f.decode(f.outMem[i][:n], ts)
		}
		if f.brokenTS[ts] {
			f.outFlags[i] = bufFlagError
		}
		f.outDone = append(f.outDone, i)
	case bufTypeCapture:
		if !f.capStream || i >= f.capN {
			return syscall.EINVAL
		}
		f.capQueued = append(f.capQueued, i)
	default:
		return syscall.EINVAL
	}
	return nil
}

// decode parses one access unit: a new size raises RESOLUTION_CHANGE; a
// picture waits for a capture buffer of its size.
func (f *fakeDecoder) decode(au []byte, ts uint64) {
	vcl := false
	h26x.SplitAnnexB(au, func(nal []byte) bool {
		t := f.codec.NALType(nal)
		switch {
		case f.codec == h26x.H264 && t == 7, f.codec == h26x.H265 && t == 33:
			if !bytes.Equal(nal, f.lastSPS) {
				if s, err := h26x.ParseSPS(f.codec, nal); err == nil {
					f.lastSPS = append(f.lastSPS[:0], nal...)
					if s.Width != f.w || s.Height != f.h {
						f.w, f.h = s.Width, s.Height
						f.events = append(f.events, eventResolutionChange)
					}
				}
			}
		case f.codec == h26x.H264 && t >= 1 && t <= 5, f.codec == h26x.H265 && t < 32:
			vcl = true
		}
		return true
	})
	if vcl && f.w > 0 {
		f.pending = append(f.pending, picture{ts: ts, w: f.w, h: f.h, err: f.errorTS[ts]})
	}
}

func (f *fakeDecoder) dqbuf(b []byte) error {
	p := bytesAt(deref(get64(b, bufPlanes)), planeSize)
	switch get32(b, bufType) {
	case bufTypeOutput:
		if len(f.outDone) == 0 {
			return syscall.EAGAIN
		}
		i := f.outDone[0]
		f.outDone = f.outDone[1:]
		set32(b, bufIndex, uint32(i))
		set32(b, bufFlags, f.outFlags[i])
		delete(f.outFlags, i)
	case bufTypeCapture:
		if !f.capStream {
			return syscall.EINVAL
		}
		if len(f.pending) == 0 || len(f.capQueued) == 0 || f.pending[0].w != f.capW || f.pending[0].h != f.capH {
			if f.eos && len(f.pending) == 0 {
				if f.sentLast {
					return syscall.EPIPE
				}
				if len(f.capQueued) > 0 {
					f.sentLast = true
					i := f.capQueued[0]
					f.capQueued = f.capQueued[1:]
					set32(b, bufIndex, uint32(i))
					set32(b, bufFlags, bufFlagLast)
					set32(p, plBytesUsed, 0)
					return nil
				}
			}
			return syscall.EAGAIN
		}
		pic := f.pending[0]
		f.pending = f.pending[1:]
		i := f.capQueued[0]
		f.capQueued = f.capQueued[1:]
		f.capContent[i] = pic
		set32(b, bufIndex, uint32(i))
		set64(b, bufTimeSec, pic.ts/1_000_000)
		set64(b, bufTimeUsec, pic.ts%1_000_000)
		set32(p, plBytesUsed, uint32(pic.w*pic.h))
		if pic.err {
			set32(b, bufFlags, bufFlagError)
		}
	default:
		return syscall.EINVAL
	}
	return nil
}

// The surfaces side.

func (f *fakeDecoder) fromFd(fd int) (uintptr, error) {
	i := fd - 100
	if i < 0 || i >= f.capN {
		return 0, fmt.Errorf("fd %d is no capture buffer", fd)
	}
	s := uintptr(1000 + i)
	f.surfaces[s] = &fakeSurface{w: f.capW, h: f.capH, dmabf: true}
	return s, nil
}

func (f *fakeDecoder) allocNV12(w, h int) (uintptr, error) {
	s := f.nextSurf
	f.nextSurf++
	f.surfaces[s] = &fakeSurface{w: w, h: h, pitch: (w + 255) &^ 255, base: uintptr(s) << 32}
	f.counts["surfaces"]++
	return s, nil
}

func (f *fakeDecoder) convert(src, dst uintptr, left, top, w, h int) error {
	if f.failConvert {
		return fmt.Errorf("NvBufSurfTransform: error -2")
	}
	s, d := f.surfaces[src], f.surfaces[dst]
	if s == nil || d == nil || !s.dmabf || d.dmabf || d.w != w || d.h != h || left != 0 || top != 0 {
		return fmt.Errorf("convert %d -> %d (%dx%d at %d,%d): bad surfaces", src, dst, w, h, left, top)
	}
	i := int(src - 1000)
	d.pic = f.capContent[i]
	return nil
}

func (f *fakeDecoder) cuda(surf uintptr) (uintptr, uintptr, int, error) {
	s := f.surfaces[surf]
	if f.failCUDA {
		return 0, 0, 0, fmt.Errorf("cuGraphicsEGLRegisterImage: CUDA_ERROR_INVALID_VALUE")
	}
	if s == nil || s.dmabf {
		return 0, 0, 0, fmt.Errorf("surface %d cannot be mapped", surf)
	}
	f.counts["mapped"]++
	return s.base, s.base + 1<<28, s.pitch, nil
}

func (f *fakeDecoder) release(surf uintptr) error {
	if f.surfaces[surf] == nil {
		return fmt.Errorf("surface %d released twice", surf)
	}
	delete(f.surfaces, surf)
	f.counts["released"]++
	return nil
}

// pattern is the byte at (x, y) of a plane (0 luma, 1 chroma) of the
// picture with timestamp ts.
func pattern(ts uint64, plane, x, y int) byte { return byte(int(ts)*29 + x*5 + y*3 + plane*77) }

// fakeGPU reads the fake surfaces' "device memory".
type fakeGPU struct {
	f        *fakeDecoder
	device   []byte
	closes   int
	owned    bool // the stream owns the device memory
	attaches int
}

const fakeDeviceBase = 0x7000_0000_0000

func (g *fakeGPU) bind() error { return nil }

// attach: the fake's device memory is managed; the test checks that a
// copy into it happens while the stream owns it, and that it goes back.
func (g *fakeGPU) attach(p uintptr, host bool) error {
	if p < fakeDeviceBase {
		return fmt.Errorf("not managed memory")
	}
	g.owned = !host
	g.attaches++
	return nil
}
func (g *fakeGPU) sync() error { return nil }
func (g *fakeGPU) close()      { g.closes++ }

func (g *fakeGPU) copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error {
	s := g.f.surfaces[src>>32]
	if s == nil {
		return fmt.Errorf("address %#x is no mapped surface", src)
	}
	plane, off := 0, int(src-s.base)
	if off >= 1<<28 {
		plane, off = 1, off-1<<28
	}
	if off != 0 || pitch != s.pitch || width > pitch {
		return fmt.Errorf("copy from %#x pitch %d width %d", src, pitch, width)
	}
	for y := range height {
		var row []byte
		if dst == 0 {
			row = unsafe.Slice((*byte)(unsafe.Add(host, y*dpitch)), width)
		} else {
			if !g.owned {
				return fmt.Errorf("a copy into managed memory the stream does not own")
			}
			o := int(dst-fakeDeviceBase) + y*dpitch
			row = g.device[o : o+width]
		}
		for x := range row {
			row[x] = pattern(s.pic.ts, plane, x, y)
		}
	}
	return nil
}

func openFake(c h26x.Codec, o Options) (*Decoder, *fakeDecoder, *fakeGPU, error) {
	f := newFake(c)
	g := &fakeGPU{f: f, device: make([]byte, 1<<20)}
	d, err := newDecoder(f, f, g, c, o)
	return d, f, g, err
}
