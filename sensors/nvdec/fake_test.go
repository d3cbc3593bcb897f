package nvdec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors/h26x"
)

// fakeLib is libnvcuvid for the tests: its parser reads real Annex-B
// access units (h26x finds the SPS, its size and format), calls the
// sequence callback on the first SPS and on every SPS that differs, the
// decode callback for every picture after one, and the display callback
// at once (no reordering, as with ulMaxDisplayDelay 0 and no B-frames).
// Its "decoding" fills the surface with a pattern of the picture's
// timestamp, so a test knows every byte Write must produce; the surfaces
// live at fake device addresses that fakeGPU copies from. Failures are
// injected per call.
type fakeLib struct {
	codec   h26x.Codec
	cb      callbacks
	parsers int

	lastSPS  []byte
	surfaces int   // what the sequence callback returned
	next     int   // the next surface a picture decodes into
	ts       int64 // the timestamp of the access unit being parsed
	sawSeq   bool

	fmtBuf  [formatSize]byte
	picBuf  [picSize]byte
	dispBuf [dispSize]byte

	// what cuvidGetDecoderCaps says
	supported              bool
	maxW, maxH, maxMB      uint32
	minSurfaces            byte
	minW, minH             uint16
	decs                   map[uintptr]*fakeDec
	nextDec                uintptr
	created, reconfigured  int
	destroyed, destroyedPs int
	infos                  [][createSize]byte
	reconfs                [][reconfSize]byte
	mapped, maxMapped      int
	wantStream             uintptr
	streamSeen             []uintptr

	sortTimestamps bool // display timestamps are not the access units'
	displayed      int

	// failures
	failParser, failCreate, failReconfigure, failMap, failParse bool
	failDecodeTS                                                int64 // a picture of this timestamp fails to decode (-1: none)
	statusTS                                                    map[int64]int
}

type fakeDec struct {
	codedW, codedH, tw, th int
	display                [4]int16
	surfaces               int
	pitch                  int
	mem                    [][]byte // per surface: luma rows, then chroma rows
	tss                    []int64  // per surface: the timestamp decoded into it
	base                   uintptr
}

const fakeSurfaceSpan = 1 << 24

func newFakeLib(c h26x.Codec) *fakeLib {
	return &fakeLib{codec: c, supported: true, maxW: 4096, maxH: 4096, maxMB: 65536, minSurfaces: 5, minW: 48, minH: 16,
		decs: map[uintptr]*fakeDec{}, nextDec: 1, failDecodeTS: -1, statusTS: map[int64]int{}, wantStream: 0xabc0}
}

// pattern is the byte a fake decode puts at (x, y) of a plane (0 luma, 1
// the interleaved chroma) of the picture with timestamp ts.
func pattern(ts int64, plane, x, y int) byte { return byte(int(ts)*31 + x*3 + y*7 + plane*101) }

func (f *fakeLib) createParser(codec uint32, cb callbacks) (uintptr, uintptr, cuda.Result) {
	want := uint32(codecH264)
	if f.codec == h26x.H265 {
		want = codecHEVC
	}
	if f.failParser || codec != want {
		return 0, 0, 100 // CUDA_ERROR_NO_DEVICE
	}
	f.cb = cb
	f.parsers++
	return 0x5000, 0x77, cuda.Success
}

func (f *fakeLib) parse(parser uintptr, data []byte, flags uint32, ts int64) cuda.Result {
	if parser != 0x5000 {
		return 400 // CUDA_ERROR_INVALID_HANDLE
	}
	if flags&pktEndOfStream != 0 {
		f.cb.display(nil)
		return cuda.Success
	}
	if f.failParse {
		return 1
	}
	if flags&pktTimestamp == 0 {
		return 1
	}
	f.ts = ts
	var sps []byte
	vcl := false
	h26x.SplitAnnexB(data, func(nal []byte) bool {
		typ := f.codec.NALType(nal)
		switch {
		case f.codec == h26x.H264 && typ == 7, f.codec == h26x.H265 && typ == 33:
			sps = nal
		case f.codec == h26x.H264 && typ >= 1 && typ <= 5, f.codec == h26x.H265 && typ < 32:
			vcl = true
		}
		return true
	})
	if sps != nil && !bytes.Equal(sps, f.lastSPS) {
		s, err := h26x.ParseSPS(f.codec, sps)
		if err != nil {
			return 1
		}
		f.lastSPS = append(f.lastSPS[:0], sps...)
		b := f.fmtBuf[:]
		clear(b)
		code := uint32(codecH264)
		if f.codec == h26x.H265 {
			code = codecHEVC
		}
		binary.LittleEndian.PutUint32(b[fmtCodec:], code)
		if !s.Interlaced {
			b[fmtProgressive] = 1
		}
		b[fmtDepthLuma], b[fmtDepthChroma] = byte(s.BitDepth-8), byte(s.BitDepthChroma-8)
		b[fmtMinSurfaces] = f.minSurfaces
		binary.LittleEndian.PutUint32(b[fmtCodedW:], uint32((s.Width+15)&^15))
		binary.LittleEndian.PutUint32(b[fmtCodedH:], uint32((s.Height+15)&^15))
		for i, v := range []int{0, 0, s.Width, s.Height} {
			binary.LittleEndian.PutUint32(b[fmtDisplay+4*i:], uint32(v))
		}
		binary.LittleEndian.PutUint32(b[fmtChroma:], uint32(s.ChromaFormat))
		n := f.cb.sequence(unsafe.Pointer(&f.fmtBuf))
		if n == 0 {
			f.sawSeq = false
			return cuda.Success // the real parser, too, goes on: the callback's failure is the caller's to report
		}
		f.sawSeq, f.surfaces, f.next = true, n, 0
	}
	if !vcl || !f.sawSeq {
		return cuda.Success // nothing decodes before a sequence header
	}
	idx := f.next % f.surfaces
	f.next++
	clear(f.picBuf[:64])
	binary.LittleEndian.PutUint32(f.picBuf[picCurrIdx:], uint32(idx))
	if f.cb.decode(unsafe.Pointer(&f.picBuf)) == 0 {
		return cuda.Success
	}
	d := f.dispBuf[:]
	clear(d)
	binary.LittleEndian.PutUint32(d[dispIndex:], uint32(idx))
	binary.LittleEndian.PutUint32(d[dispProgressive:], 1)
	dts := uint64(ts)
	if f.sortTimestamps {
		dts = uint64(f.displayed) // what the real parser does with B-frames: timestamps handed out in increasing order
	}
	f.displayed++
	binary.LittleEndian.PutUint64(d[dispTimestamp:], dts)
	f.cb.display(unsafe.Pointer(&f.dispBuf))
	return cuda.Success
}

func (f *fakeLib) destroyParser(parser, user uintptr) cuda.Result {
	if parser != 0x5000 || user != 0x77 {
		return 400
	}
	f.destroyedPs++
	return cuda.Success
}

func (f *fakeLib) caps(c *[capsSize]byte) cuda.Result {
	if le32(c[:], capChroma) != chroma420 {
		return 1
	}
	if f.supported {
		c[capSupported] = 1
	}
	c[capEngines] = 3
	binary.LittleEndian.PutUint32(c[capMaxW:], f.maxW)
	binary.LittleEndian.PutUint32(c[capMaxH:], f.maxH)
	binary.LittleEndian.PutUint32(c[capMaxMB:], f.maxMB)
	binary.LittleEndian.PutUint16(c[capMinW:], f.minW)
	binary.LittleEndian.PutUint16(c[capMinH:], f.minH)
	return cuda.Success
}

func u64(b []byte, off int) int { return int(binary.LittleEndian.Uint64(b[off:])) }

func (f *fakeLib) createDecoder(info *[createSize]byte) (uintptr, cuda.Result) {
	if f.failCreate {
		return 0, 2 // CUDA_ERROR_OUT_OF_MEMORY
	}
	b := info[:]
	d := &fakeDec{codedW: u64(b, crW), codedH: u64(b, crH), tw: u64(b, crTargetW), th: u64(b, crTargetH), surfaces: u64(b, crSurfaces)}
	if d.tw%2 == 1 || d.th%2 == 1 || d.tw == 0 || d.surfaces <= 0 || le32(b, crOutFormat) != surfaceNV12 {
		return 0, 1
	}
	for i := range d.display {
		d.display[i] = int16(binary.LittleEndian.Uint16(b[crDisplay+2*i:]))
	}
	f.layout(d)
	h := f.nextDec
	f.nextDec++
	d.base = h * 64 * fakeSurfaceSpan
	f.decs[h] = d
	f.created++
	f.infos = append(f.infos, *info)
	return h, cuda.Success
}

// layout gives a decoder's surfaces their memory: a pitch wider than the
// picture, filled with 0xEE where no picture is.
func (f *fakeLib) layout(d *fakeDec) {
	d.pitch = (d.tw + 127) &^ 127
	d.mem = make([][]byte, d.surfaces)
	d.tss = make([]int64, d.surfaces)
	for i := range d.mem {
		d.mem[i] = bytes.Repeat([]byte{0xEE}, d.pitch*(d.th+d.th/2))
	}
}

func (f *fakeLib) reconfigure(dec uintptr, info *[reconfSize]byte) cuda.Result {
	d := f.decs[dec]
	if d == nil {
		return 400
	}
	if f.failReconfigure {
		return 801 // CUDA_ERROR_NOT_SUPPORTED
	}
	b := info[:]
	w, h := int(le32(b, rcW)), int(le32(b, rcH))
	if w > d.codedW || h > d.codedH || int(le32(b, rcSurfaces)) > d.surfaces {
		return 1
	}
	d.tw, d.th = int(le32(b, rcTargetW)), int(le32(b, rcTargetH))
	for i := range d.display {
		d.display[i] = int16(binary.LittleEndian.Uint16(b[rcDisplay+2*i:]))
	}
	f.layout(d)
	f.reconfigured++
	f.reconfs = append(f.reconfs, *info)
	return cuda.Success
}

func (f *fakeLib) destroyDecoder(dec uintptr) cuda.Result {
	if f.decs[dec] == nil {
		return 400
	}
	delete(f.decs, dec)
	f.destroyed++
	return cuda.Success
}

func (f *fakeLib) decodePicture(dec uintptr, pic unsafe.Pointer) cuda.Result {
	d := f.decs[dec]
	if d == nil {
		return 400
	}
	if f.ts == f.failDecodeTS {
		return 1
	}
	idx := int(le32(view(pic, picSize), picCurrIdx))
	s := d.mem[idx]
	d.tss[idx] = f.ts
	w, h := int(d.display[2]-d.display[0]), int(d.display[3]-d.display[1])
	for y := range h {
		for x := range w {
			s[y*d.pitch+x] = pattern(f.ts, 0, x, y)
		}
	}
	for y := range (h + 1) / 2 {
		for x := range 2 * ((w + 1) / 2) {
			s[(d.th+y)*d.pitch+x] = pattern(f.ts, 1, x, y)
		}
	}
	return cuda.Success
}

func (f *fakeLib) decodeStatus(dec uintptr, idx int) (int, cuda.Result) {
	d := f.decs[dec]
	if d == nil {
		return 0, 400
	}
	if st, ok := f.statusTS[d.tss[idx]]; ok {
		return st, cuda.Success
	}
	return 2, cuda.Success // cuvidDecodeStatus_Success
}

func (f *fakeLib) mapFrame(dec uintptr, idx int, proc *[procSize]byte) (uintptr, int, cuda.Result) {
	d := f.decs[dec]
	if d == nil || idx < 0 || idx >= d.surfaces {
		return 0, 0, 400
	}
	f.streamSeen = append(f.streamSeen, uintptr(binary.LittleEndian.Uint64(proc[procStream:])))
	if f.failMap {
		return 0, 0, 1
	}
	f.mapped++
	f.maxMapped = max(f.maxMapped, f.mapped)
	return d.base + uintptr(idx)*fakeSurfaceSpan, d.pitch, cuda.Success
}

func (f *fakeLib) unmapFrame(dec, dptr uintptr) cuda.Result {
	if f.decs[dec] == nil || f.mapped == 0 {
		return 400
	}
	f.mapped--
	return cuda.Success
}

// find returns the surface memory from device address p on.
func (f *fakeLib) find(p uintptr) ([]byte, error) {
	for _, d := range f.decs {
		if p >= d.base && p < d.base+uintptr(d.surfaces)*fakeSurfaceSpan {
			i, off := int((p-d.base)/fakeSurfaceSpan), int((p-d.base)%fakeSurfaceSpan)
			if off > len(d.mem[i]) {
				return nil, fmt.Errorf("address %#x beyond surface %d", p, i)
			}
			return d.mem[i][off:], nil
		}
	}
	return nil, fmt.Errorf("address %#x is no surface", p)
}

// fakeGPU copies from fakeLib's surfaces to host memory or to its own
// "device" memory at fakeDeviceBase.
type fakeGPU struct {
	lib      *fakeLib
	device   []byte
	binds    int
	failBind bool
	failCopy bool
	syncs    int
	closes   int
}

const fakeDeviceBase = 0x7000_0000_0000

func (g *fakeGPU) bind() error {
	if g.failBind {
		return fmt.Errorf("%w: cuCtxSetCurrent: %w", ErrDecode, cuda.Result(201))
	}
	g.binds++
	return nil
}

func (g *fakeGPU) stream() uintptr { return g.lib.wantStream }

func (g *fakeGPU) copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error {
	if g.failCopy {
		return fmt.Errorf("cuMemcpy2DAsync: %w", cuda.Result(700))
	}
	if width > pitch || width > dpitch {
		return fmt.Errorf("width %d over pitch %d / %d", width, pitch, dpitch)
	}
	s, err := g.lib.find(src)
	if err != nil {
		return err
	}
	if len(s) < (height-1)*pitch+width {
		return fmt.Errorf("%d rows of %d from %#x run past the surface", height, width, src)
	}
	for y := range height {
		row := s[y*pitch : y*pitch+width]
		if dst == 0 {
			copy(unsafe.Slice((*byte)(unsafe.Add(host, y*dpitch)), width), row)
			continue
		}
		off := int(dst-fakeDeviceBase) + y*dpitch
		if dst < fakeDeviceBase || off+width > len(g.device) {
			return fmt.Errorf("device address %#x outside the fake device memory", dst)
		}
		copy(g.device[off:off+width], row)
	}
	return nil
}

func (g *fakeGPU) sync() error { g.syncs++; return nil }
func (g *fakeGPU) close()      { g.closes++ }

// openFake makes a Decoder on the fakes.
func openFake(c h26x.Codec, o Options) (*Decoder, *fakeLib, *fakeGPU, error) {
	lib := newFakeLib(c)
	g := &fakeGPU{lib: lib, device: make([]byte, 1<<20)}
	d, err := newDecoder(lib, g, c, o, "NVDEC (fake)")
	return d, lib, g, err
}
