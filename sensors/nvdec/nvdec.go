package nvdec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// Errors of this package.
var (
	// ErrNoNVDEC: NVDEC cannot be used here (no libnvcuvid, no CUDA
	// device, a build without cgo).
	ErrNoNVDEC = errors.New("nvdec: NVDEC not available")
	// ErrDecode: the parser or the decoder failed on an access unit, or a
	// picture could not be mapped or copied; pictures that refer to it are
	// suspect.
	ErrDecode = errors.New("nvdec: decoding failed")
)

// Libraries are the files Load tries, in order, when no library is named:
// the loader's name (the driver registers it in the loader cache), then
// where NVIDIA's container toolkit mounts the driver's libraries.
var Libraries = []string{"libnvcuvid.so.1", "/usr/local/nvidia/lib64/libnvcuvid.so.1", "/usr/lib/x86_64-linux-gnu/libnvcuvid.so.1"}

// Options configure a decoder.
type Options struct {
	// Device is the CUDA device's ordinal.
	Device int
	// Library is the libnvcuvid file to load; "" tries Libraries. One
	// process loads one: the first Load decides.
	Library string
	// Params are the stream's parameter sets as Annex-B (an SDP's
	// sprop-parameter-sets); they go to the parser before the first access
	// unit. nil when the stream carries them in band.
	Params []byte
}

// extraSurfaces are decode surfaces beyond the stream's minimum: a picture
// the display callback queued is mapped after cuvidParseVideoData returns,
// so its surface must not be the next decode's.
const extraSurfaces = 4

// maxSurfaces bounds the decode surfaces a Decoder tracks (H.264 and
// HEVC need at most 17 plus extraSurfaces).
const maxSurfaces = 64

// queueLen bounds the pictures displayed and not yet received: more than
// a parser shows in one call (a flush of a full DPB).
const queueLen = 32

// NVDECODE's values (nv-codec-headers' dynlink_cuviddec.h and
// dynlink_nvcuvid.h, SDK 11 to 13).
const (
	codecH264 = 4
	codecHEVC = 8

	chroma420 = 1

	surfaceNV12   = 0
	createCUVID   = 4 // cudaVideoCreate_PreferCUVID
	deinterlaceWv = 0 // cudaVideoDeinterlaceMode_Weave

	statusError     = 8
	statusConcealed = 9

	pktEndOfStream  = 0x01
	pktTimestamp    = 0x02
	pktEndOfPicture = 0x08
)

// Structure sizes and field offsets (LP64: the same on x86-64 and arm64).
const (
	capsSize   = 88  // CUVIDDECODECAPS
	createSize = 176 // CUVIDDECODECREATEINFO
	reconfSize = 128 // CUVIDRECONFIGUREDECODERINFO
	procSize   = 264 // CUVIDPROCPARAMS
	formatSize = 64  // CUVIDEOFORMAT
	dispSize   = 24  // CUVIDPARSERDISPINFO
	picSize    = 4280

	// CUVIDEOFORMAT
	fmtCodec, fmtProgressive, fmtDepthLuma, fmtDepthChroma, fmtMinSurfaces = 0, 12, 13, 14, 15
	fmtCodedW, fmtCodedH, fmtDisplay, fmtChroma                            = 16, 20, 24, 40
	// CUVIDDECODECAPS
	capCodec, capChroma, capDepth, capSupported, capEngines = 0, 4, 8, 24, 25
	capMaxW, capMaxH, capMaxMB, capMinW, capMinH            = 28, 32, 36, 40, 42
	// CUVIDDECODECREATEINFO
	crW, crH, crSurfaces, crCodec, crChroma, crFlags, crDepth = 0, 8, 16, 24, 28, 32, 40
	crMaxW, crMaxH, crDisplay, crOutFormat, crDeinterlace     = 56, 64, 80, 88, 92
	crTargetW, crTargetH, crOutSurfaces                       = 96, 104, 112
	// CUVIDRECONFIGUREDECODERINFO
	rcW, rcH, rcTargetW, rcTargetH, rcSurfaces, rcDisplay = 0, 4, 8, 12, 16, 68
	// CUVIDPARSERDISPINFO
	dispIndex, dispProgressive, dispTopFirst, dispRepeat, dispTimestamp = 0, 4, 8, 12, 16
	// CUVIDPROCPARAMS
	procProgressive, procSecond, procTopFirst, procUnpaired, procStream = 0, 4, 8, 12, 56
	// CUVIDPICPARAMS
	picCurrIdx = 8
)

// callbacks are what the parser calls, from inside parse, on the calling
// thread; each returns what libnvcuvid wants of it (0: failure).
type callbacks interface {
	sequence(format unsafe.Pointer) int
	decode(pic unsafe.Pointer) int
	display(info unsafe.Pointer) int
}

// library is libnvcuvid's calls as a Decoder makes them (the cgo binding;
// the tests' fake). Each needs the device's context current on the calling
// thread.
type library interface {
	createParser(codec uint32, cb callbacks) (parser, user uintptr, r cuda.Result)
	parse(parser uintptr, data []byte, flags uint32, ts int64) cuda.Result
	destroyParser(parser, user uintptr) cuda.Result
	caps(c *[capsSize]byte) cuda.Result
	createDecoder(info *[createSize]byte) (uintptr, cuda.Result)
	reconfigure(dec uintptr, info *[reconfSize]byte) cuda.Result
	destroyDecoder(dec uintptr) cuda.Result
	decodePicture(dec uintptr, pic unsafe.Pointer) cuda.Result
	decodeStatus(dec uintptr, idx int) (int, cuda.Result)
	mapFrame(dec uintptr, idx int, proc *[procSize]byte) (dptr uintptr, pitch int, r cuda.Result)
	unmapFrame(dec, dptr uintptr) cuda.Result
}

// gpu is the device side of a Decoder: its context and the CUDA stream
// the surfaces are mapped and copied on (internal/cuda; the tests' fake).
type gpu interface {
	// bind makes the context current on this OS thread (the caller has
	// locked it).
	bind() error
	stream() uintptr
	// copy2D copies height rows of width bytes from device memory at src
	// (pitch apart) to dst (a device address) or, when dst is 0, to host.
	copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error
	sync() error
	close()
}

// shown is one picture the parser displayed.
type shown struct {
	idx                                  int
	ts                                   int64
	gen                                  uint32
	progressive, topFirst, repeat, valid int32
}

// geometry is what a decoder was made or reconfigured for.
type geometry struct {
	codedW, codedH uint32
	display        [4]int32 // left, top, right, bottom
	w, h           int      // the visible picture
	tw, th         int      // the surface (target) size: w, h rounded up to even
}

// cArgs are the structures a Decoder hands to libnvcuvid, an allocation
// of their own that holds no Go pointer: cgo checks the whole object an
// unsafe.Pointer argument points into, and a Decoder holds Go pointers
// (its library, its queue), so a field of it would fail the check.
type cArgs struct {
	caps   [capsSize]byte
	create [createSize]byte
	reconf [reconfSize]byte
	proc   [procSize]byte
}

// Decoder decodes one H.264 or H.265 stream on one GPU. Its methods must
// not be called concurrently.
type Decoder struct {
	lib   library
	gpu   gpu
	codec h26x.Codec
	desc  string

	parser, user uintptr
	dec          uintptr
	maxW, maxH   uint32 // the decoder was created for coded sizes up to these
	surfaces     int
	geo          geometry
	gen          uint32 // a new decoder or geometry: older pictures are dropped

	queue   [queueLen]shown
	head, n int
	cur     shown
	have    bool
	err     error // the first failure of a callback during one parse

	// ids maps a decode surface to the id of the access unit decoded into
	// it (the decode callback runs inside the Send of that access unit):
	// a display callback's timestamp is not the access unit's with
	// B-frames, as the parser hands timestamps out in increasing order.
	ids   [maxSurfaces]uint64
	curID uint64

	params     []byte
	sentParams bool
	scratch    []byte

	c      *cArgs // the structures handed to libnvcuvid
	closed bool

	// counters for tests and Stats
	creates, reconfigures, overflows int
}

// Caps is what a GPU's NVDEC decodes of one codec (4:2:0, 8-bit), as
// Probe reports it.
type Caps struct {
	Supported           bool
	Engines             int
	MaxWidth, MaxHeight int
}

// Stats counts what a decoder did.
type Stats struct {
	// Creates counts decoders made (the first SPS, and a change that
	// could not reconfigure); Reconfigures, changes followed in place.
	Creates, Reconfigures int
	// Overflows counts displayed pictures dropped because more than
	// queueLen waited (none when the caller receives after every Send).
	Overflows int
}

// Stats returns the counters.
func (d *Decoder) Stats() Stats {
	return Stats{Creates: d.creates, Reconfigures: d.reconfigures, Overflows: d.overflows}
}

func codecOf(c h26x.Codec) (uint32, error) {
	switch c {
	case h26x.H264:
		return codecH264, nil
	case h26x.H265:
		return codecHEVC, nil
	}
	return 0, fmt.Errorf("%w: codec %s", sensors.ErrFormat, c)
}

// newDecoder makes a decoder on lib and g; on error g is closed.
func newDecoder(lib library, g gpu, c h26x.Codec, o Options, desc string) (*Decoder, error) {
	code, err := codecOf(c)
	if err != nil {
		g.close()
		return nil, err
	}
	d := &Decoder{lib: lib, gpu: g, codec: c, desc: desc, params: o.Params, c: new(cArgs)}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := g.bind(); err != nil {
		g.close()
		return nil, err
	}
	p, u, r := lib.createParser(code, d)
	if r != cuda.Success {
		g.close()
		return nil, fmt.Errorf("%w: cuvidCreateVideoParser (%s): %w", ErrNoNVDEC, c, r)
	}
	d.parser, d.user = p, u
	return d, nil
}

// Describe names NVDEC, the device and the codec.
func (d *Decoder) Describe() string { return d.desc }

func le32(b []byte, off int) uint32     { return binary.LittleEndian.Uint32(b[off:]) }
func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
func put16(b []byte, off int, v int16)  { binary.LittleEndian.PutUint16(b[off:], uint16(v)) }

// view is n bytes of C (or fake) memory at p, read only while a callback
// runs.
func view(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

func (d *Decoder) fail(err error) int {
	if d.err == nil {
		d.err = err
	}
	return 0
}

// sequence is the parser's sequence callback: the first SPS and every
// change of format. It creates, reconfigures or re-creates the decoder and
// returns the number of decode surfaces.
func (d *Decoder) sequence(p unsafe.Pointer) int {
	f := view(p, formatSize)
	g := geometry{codedW: le32(f, fmtCodedW), codedH: le32(f, fmtCodedH)}
	for i := range g.display {
		g.display[i] = int32(le32(f, fmtDisplay+4*i))
	}
	g.w, g.h = int(g.display[2]-g.display[0]), int(g.display[3]-g.display[1])
	g.tw, g.th = (g.w+1)&^1, (g.h+1)&^1
	chroma, depth := le32(f, fmtChroma), int(f[fmtDepthLuma])
	switch {
	case chroma != chroma420:
		return d.fail(fmt.Errorf("%w: %s chroma format %d (edged decodes 4:2:0 only)", sensors.ErrFormat, d.codec, chroma))
	case depth != 0 || f[fmtDepthChroma] != 0:
		return d.fail(fmt.Errorf("%w: %s with %d-bit samples (edged decodes 8-bit only)", sensors.ErrFormat, d.codec, depth+8))
	case f[fmtProgressive] == 0:
		return d.fail(fmt.Errorf("%w: %s interlaced (fields)", sensors.ErrFormat, d.codec))
	case g.w <= 0 || g.h <= 0 || g.w > h26x.MaxDimension || g.h > h26x.MaxDimension || g.display[0] < 0 || g.display[1] < 0:
		return d.fail(fmt.Errorf("%w: %s display area %v of a %dx%d picture", sensors.ErrFormat, d.codec, g.display, g.codedW, g.codedH))
	}
	if err := d.fits(le32(f, fmtCodec), g); err != nil {
		return d.fail(err)
	}
	surfaces := int(f[fmtMinSurfaces]) + extraSurfaces
	if f[fmtMinSurfaces] == 0 {
		surfaces = 20
	}
	surfaces = min(surfaces, maxSurfaces)
	if d.dec != 0 {
		if g == d.geo {
			return d.surfaces
		}
		if g.codedW <= d.maxW && g.codedH <= d.maxH && surfaces <= d.surfaces && d.reconfigure(g) {
			return d.surfaces
		}
		d.lib.destroyDecoder(d.dec)
		d.dec = 0
	}
	if err := d.createDecoder(le32(f, fmtCodec), g, surfaces); err != nil {
		return d.fail(err)
	}
	return d.surfaces
}

// fits asks the GPU whether it decodes the stream (cuvidGetDecoderCaps).
func (d *Decoder) fits(codec uint32, g geometry) error {
	c := &d.c.caps
	clear(c[:])
	put32(c[:], capCodec, codec)
	put32(c[:], capChroma, chroma420)
	if r := d.lib.caps(c); r != cuda.Success {
		return fmt.Errorf("%w: cuvidGetDecoderCaps: %w", ErrDecode, r)
	}
	maxW, maxH, maxMB := le32(c[:], capMaxW), le32(c[:], capMaxH), le32(c[:], capMaxMB)
	minW, minH := uint32(binary.LittleEndian.Uint16(c[capMinW:])), uint32(binary.LittleEndian.Uint16(c[capMinH:]))
	switch {
	case c[capSupported] == 0:
		return fmt.Errorf("%w: this GPU's NVDEC does not decode %s 4:2:0 8-bit", sensors.ErrFormat, d.codec)
	case g.codedW > maxW || g.codedH > maxH || (g.codedW>>4)*(g.codedH>>4) > maxMB:
		return fmt.Errorf("%w: %s %dx%d: this GPU's NVDEC decodes %s up to %dx%d (%d macroblocks)", sensors.ErrFormat, d.codec, g.w, g.h, d.codec, maxW, maxH, maxMB)
	case g.codedW < minW || g.codedH < minH:
		return fmt.Errorf("%w: %s %dx%d: this GPU's NVDEC decodes %s from %dx%d", sensors.ErrFormat, d.codec, g.w, g.h, d.codec, minW, minH)
	}
	return nil
}

// createDecoder makes the decoder for g (cuvidCreateDecoder).
func (d *Decoder) createDecoder(codec uint32, g geometry, surfaces int) error {
	c := &d.c.create
	clear(c[:])
	put64(c[:], crW, uint64(g.codedW))
	put64(c[:], crH, uint64(g.codedH))
	put64(c[:], crSurfaces, uint64(surfaces))
	put32(c[:], crCodec, codec)
	put32(c[:], crChroma, chroma420)
	put64(c[:], crFlags, createCUVID)
	put64(c[:], crDepth, 0)
	put64(c[:], crMaxW, uint64(g.codedW))
	put64(c[:], crMaxH, uint64(g.codedH))
	for i, v := range g.display {
		put16(c[:], crDisplay+2*i, int16(v))
	}
	put32(c[:], crOutFormat, surfaceNV12)
	put32(c[:], crDeinterlace, deinterlaceWv)
	put64(c[:], crTargetW, uint64(g.tw))
	put64(c[:], crTargetH, uint64(g.th))
	put64(c[:], crOutSurfaces, 2)
	dec, r := d.lib.createDecoder(c)
	if r != cuda.Success {
		return fmt.Errorf("%w: cuvidCreateDecoder (%s %dx%d, %d surfaces): %w", ErrDecode, d.codec, g.w, g.h, surfaces, r)
	}
	d.dec, d.maxW, d.maxH, d.surfaces, d.geo = dec, g.codedW, g.codedH, surfaces, g
	d.creates++
	d.newGeneration()
	return nil
}

// reconfigure follows a new size in place (cuvidReconfigureDecoder); false
// when the decoder refuses (it is then made again).
func (d *Decoder) reconfigure(g geometry) bool {
	c := &d.c.reconf
	clear(c[:])
	put32(c[:], rcW, g.codedW)
	put32(c[:], rcH, g.codedH)
	put32(c[:], rcTargetW, uint32(g.tw))
	put32(c[:], rcTargetH, uint32(g.th))
	put32(c[:], rcSurfaces, uint32(d.surfaces))
	for i, v := range g.display {
		put16(c[:], rcDisplay+2*i, int16(v))
	}
	if d.lib.reconfigure(d.dec, c) != cuda.Success {
		return false
	}
	d.geo = g
	d.reconfigures++
	d.newGeneration()
	return true
}

// newGeneration forgets the pictures queued for the old surfaces.
func (d *Decoder) newGeneration() {
	d.gen++
	d.head, d.n, d.have = 0, 0, false
}

// decode is the parser's decode callback.
func (d *Decoder) decode(p unsafe.Pointer) int {
	if d.dec == 0 {
		return d.fail(fmt.Errorf("%w: a picture before its sequence header", ErrDecode))
	}
	idx := int32(le32(view(p, picCurrIdx+4), picCurrIdx))
	if r := d.lib.decodePicture(d.dec, p); r != cuda.Success {
		return d.fail(fmt.Errorf("%w: cuvidDecodePicture (surface %d): %w", ErrDecode, idx, r))
	}
	if idx >= 0 && idx < maxSurfaces {
		d.ids[idx] = d.curID
	}
	return 1
}

// display is the parser's display callback: the picture is queued for
// Receive (nil: the end of the stream).
func (d *Decoder) display(p unsafe.Pointer) int {
	if p == nil {
		return 1
	}
	b := view(p, dispSize)
	s := shown{idx: int(int32(le32(b, dispIndex))), ts: int64(binary.LittleEndian.Uint64(b[dispTimestamp:])), gen: d.gen,
		progressive: int32(le32(b, dispProgressive)), topFirst: int32(le32(b, dispTopFirst)), repeat: int32(le32(b, dispRepeat))}
	if s.idx >= 0 && s.idx < maxSurfaces {
		s.ts = int64(d.ids[s.idx])
	}
	if d.n == queueLen {
		d.head = (d.head + 1) % queueLen
		d.n--
		d.overflows++
	}
	d.queue[(d.head+d.n)%queueLen] = s
	d.n++
	return 1
}

// Send gives the parser one access unit; id comes back with its picture.
// Call Receive until it reports none before the next Send.
func (d *Decoder) Send(au []byte, id uint64) error {
	if d.closed {
		return fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	if len(au) == 0 {
		return nil
	}
	data := au
	if !d.sentParams && len(d.params) > 0 {
		d.scratch = append(append(d.scratch[:0], d.params...), au...)
		data = d.scratch
	}
	d.sentParams = true
	d.have = false
	d.curID = id
	return d.parse(data, pktTimestamp|pktEndOfPicture, int64(id))
}

func (d *Decoder) parse(data []byte, flags uint32, ts int64) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.gpu.bind(); err != nil {
		return err
	}
	d.err = nil
	r := d.lib.parse(d.parser, data, flags, ts)
	if err := d.err; err != nil {
		d.err = nil
		return err
	}
	if r != cuda.Success {
		return fmt.Errorf("%w: cuvidParseVideoData: %w", ErrDecode, r)
	}
	return nil
}

// Drain tells the parser the stream has ended, so that Receive returns
// the pictures it still holds.
func (d *Decoder) Drain() error {
	if d.closed {
		return fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	d.have = false
	return d.parse(nil, pktEndOfStream, 0)
}

// format is the layout Write gives the current geometry's pictures: NV12,
// lines of the width rounded up to even.
func (d *Decoder) format() sensors.Format {
	f := sensors.Format{Width: d.geo.w, Height: d.geo.h, Pixel: sensors.NV12}
	if f.Width%2 == 1 {
		f.Stride = f.Width + 1
	}
	return f
}

// Receive reports the next displayed picture: the id its access unit was
// sent with and the format Write lays it out in; ok is false when none
// waits.
func (d *Decoder) Receive() (id uint64, f sensors.Format, ok bool, err error) {
	if d.closed {
		return 0, f, false, fmt.Errorf("%w: decoder closed", ErrDecode)
	}
	d.have = false
	for d.n > 0 {
		s := d.queue[d.head]
		d.head = (d.head + 1) % queueLen
		d.n--
		if s.gen != d.gen {
			continue
		}
		d.cur, d.have = s, true
		return uint64(s.ts), d.format(), true, nil
	}
	return 0, f, false, nil
}

// Write copies the picture Receive reported into dst (host memory) as
// NV12; corrupt: NVDEC reported an error or concealment in it.
func (d *Decoder) Write(dst []byte) (corrupt bool, err error) {
	f := d.format()
	if n := f.FrameSize(); len(dst) < n {
		return false, fmt.Errorf("%w: %d bytes for a %s picture of %d", sensors.ErrFormat, len(dst), f, n)
	}
	return d.write(0, unsafe.Pointer(unsafe.SliceData(dst)), f)
}

// WriteDevice copies the picture Receive reported, device to device, into
// n bytes of memory the GPU addresses at dst (a frame slot's device
// address) as NV12.
func (d *Decoder) WriteDevice(dst uintptr, n int) (corrupt bool, err error) {
	f := d.format()
	if need := f.FrameSize(); n < need || dst == 0 {
		return false, fmt.Errorf("%w: %d bytes at %#x for a %s picture of %d", sensors.ErrFormat, n, dst, f, need)
	}
	return d.write(dst, nil, f)
}

func (d *Decoder) write(dst uintptr, host unsafe.Pointer, f sensors.Format) (corrupt bool, err error) {
	if d.closed || !d.have {
		return false, fmt.Errorf("%w: no picture received to write", ErrDecode)
	}
	d.have = false
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.gpu.bind(); err != nil {
		return false, err
	}
	s := d.cur
	p := &d.c.proc
	clear(p[:])
	put32(p[:], procProgressive, uint32(s.progressive))
	put32(p[:], procSecond, uint32(s.repeat+1))
	put32(p[:], procTopFirst, uint32(s.topFirst))
	if s.repeat < 0 {
		put32(p[:], procUnpaired, 1)
	}
	put64(p[:], procStream, uint64(d.gpu.stream()))
	if st, r := d.lib.decodeStatus(d.dec, s.idx); r == cuda.Success && (st == statusError || st == statusConcealed) {
		corrupt = true
	}
	dptr, pitch, r := d.lib.mapFrame(d.dec, s.idx, p)
	if r != cuda.Success {
		return false, fmt.Errorf("%w: cuvidMapVideoFrame64 (surface %d): %w", ErrDecode, s.idx, r)
	}
	line := f.LineBytes()
	chroma := uintptr(pitch * d.geo.th) // NVDEC's luma height is even
	err = d.gpu.copy2D(dst, host, line, dptr, pitch, f.Width, f.Height)
	if err == nil {
		off := line * f.Height
		cdst, chost := dst, host
		if dst != 0 {
			cdst += uintptr(off)
		} else {
			chost = unsafe.Add(host, off)
		}
		err = d.gpu.copy2D(cdst, chost, line, dptr+chroma, pitch, 2*((f.Width+1)/2), (f.Height+1)/2)
	}
	if err == nil {
		err = d.gpu.sync()
	}
	if r := d.lib.unmapFrame(d.dec, dptr); r != cuda.Success && err == nil {
		err = fmt.Errorf("%w: cuvidUnmapVideoFrame64: %w", ErrDecode, r)
	}
	if err != nil {
		return false, fmt.Errorf("%w: copying surface %d out: %w", ErrDecode, s.idx, err)
	}
	return corrupt, nil
}

// Close frees the parser, the decoder and the stream; it is idempotent.
func (d *Decoder) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d.gpu.bind()
	if d.parser != 0 {
		d.lib.destroyParser(d.parser, d.user)
	}
	if d.dec != 0 {
		d.lib.destroyDecoder(d.dec)
	}
	d.gpu.close()
	d.parser, d.dec, d.n, d.have = 0, 0, 0, false
	return nil
}
