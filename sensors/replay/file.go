package replay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// Magic starts every raw frame file.
const Magic = "EDGEDRAW"

const (
	version    = 1
	headerSize = 32
	recordSize = 16
	maxDim     = 16384
)

// ErrCorrupt means a raw frame file is not well formed.
var ErrCorrupt = errors.New("replay: corrupt frame file")

// Header is the format a raw frame file records.
type Header struct {
	Format sensors.Format // FPS 0 when unknown
}

func (h Header) marshal() [headerSize]byte {
	var b [headerSize]byte
	copy(b[:8], Magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], uint32(h.Format.Width))
	le.PutUint32(b[16:], uint32(h.Format.Height))
	le.PutUint32(b[20:], uint32(h.Format.Pixel))
	le.PutUint32(b[24:], uint32(h.Format.Stride))
	le.PutUint32(b[28:], uint32(math.Round(h.Format.FPS*1000)))
	return b
}

// ParseHeader decodes and validates a file header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < headerSize || string(b[:8]) != Magic {
		return Header{}, fmt.Errorf("%w: no %s header", ErrCorrupt, Magic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != version {
		return Header{}, fmt.Errorf("%w: version %d, this edged reads version %d", ErrCorrupt, v, version)
	}
	w, h, st := le.Uint32(b[12:]), le.Uint32(b[16:]), le.Uint32(b[24:])
	if w == 0 || h == 0 || w > maxDim || h > maxDim || st > 4*maxDim {
		return Header{}, fmt.Errorf("%w: size %dx%d stride %d", ErrCorrupt, w, h, st)
	}
	f := sensors.Format{Width: int(w), Height: int(h), Pixel: sensors.PixelFormat(le.Uint32(b[20:])), Stride: int(st), FPS: float64(le.Uint32(b[28:])) / 1000}
	if err := pixconv.Validate(f); err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return Header{Format: f}, nil
}

// readFileHeader reads and parses the header of the recording at path.
func readFileHeader(path string) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	var b [headerSize]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return Header{}, fmt.Errorf("%w: reading header: %w", ErrCorrupt, err)
	}
	return ParseHeader(b[:])
}

// Record is one frame's metadata in a raw frame file.
type Record struct {
	Length  int
	Flags   uint32
	DeltaNs int64
}

// parseRecord decodes a record header; max bounds the frame length.
func parseRecord(b []byte, max int) (Record, error) {
	le := binary.LittleEndian
	r := Record{Length: int(le.Uint32(b[0:])), Flags: le.Uint32(b[4:]), DeltaNs: int64(le.Uint64(b[8:]))}
	if r.Length == 0 || r.Length > max || r.DeltaNs < 0 {
		return Record{}, fmt.Errorf("%w: record of %d bytes (at most %d) with delta %d ns", ErrCorrupt, r.Length, max, r.DeltaNs)
	}
	return r, nil
}

// Recorder writes a raw frame file.
type Recorder struct {
	w     *bufio.Writer
	f     sensors.Format
	max   int
	last  int64
	count int
	rec   [recordSize]byte
}

// NewRecorder writes the header for frames of format f to w.
func NewRecorder(w io.Writer, f sensors.Format) (*Recorder, error) {
	if err := pixconv.Validate(f); err != nil {
		return nil, fmt.Errorf("replay: recorder: %w", err)
	}
	r := &Recorder{w: bufio.NewWriterSize(w, 1<<16), f: f, max: f.FrameSize()}
	h := Header{Format: f}.marshal()
	if _, err := r.w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("replay: writing header: %w", err)
	}
	return r, nil
}

// WriteFrame appends one frame of data captured at tCapture (CLOCK_MONOTONIC
// ns); frames must come in capture order.
func (r *Recorder) WriteFrame(data []byte, tCapture int64, flags uint32) error {
	if len(data) == 0 || len(data) > r.max {
		return fmt.Errorf("replay: frame of %d bytes for a %s recording (1..%d)", len(data), r.f, r.max)
	}
	var d int64
	if r.count > 0 {
		if tCapture < r.last {
			return fmt.Errorf("replay: frame captured %d ns before the previous one", uint64(r.last-tCapture))
		}
		if d = tCapture - r.last; d < 0 {
			return fmt.Errorf("replay: frame captured more than %d ns after the previous one", int64(math.MaxInt64))
		}
	}
	le := binary.LittleEndian
	le.PutUint32(r.rec[0:], uint32(len(data)))
	le.PutUint32(r.rec[4:], flags)
	le.PutUint64(r.rec[8:], uint64(d))
	if _, err := r.w.Write(r.rec[:]); err != nil {
		return fmt.Errorf("replay: writing frame %d: %w", r.count, err)
	}
	if _, err := r.w.Write(data); err != nil {
		return fmt.Errorf("replay: writing frame %d: %w", r.count, err)
	}
	r.last = tCapture
	r.count++
	return nil
}

// Write appends a captured frame (its data, capture time and flags).
func (r *Recorder) Write(f sensors.Frame) error { return r.WriteFrame(f.Data(), f.TCapture, f.Flags) }

// Flush writes buffered data to the underlying writer.
func (r *Recorder) Flush() error {
	if err := r.w.Flush(); err != nil {
		return fmt.Errorf("replay: flushing recording: %w", err)
	}
	return nil
}

// frameReader reads records of a raw frame file at known offsets
// (ReadAt), so that a large frame can be read by several goroutines at
// once (fill).
type frameReader struct {
	ra     io.ReaderAt
	off    int64 // offset of the next record
	hdr    Header
	max    int
	rec    [recordSize]byte
	hdrBuf [headerSize]byte
	fill   *filler // nil: one ReadAt per frame
}

func newFrameReader(ra io.ReaderAt) (*frameReader, error) {
	fr := &frameReader{ra: ra}
	if err := fr.readHeader(); err != nil {
		return nil, err
	}
	return fr, nil
}

// readFull reads len(b) bytes at off; io.EOF when there are none,
// io.ErrUnexpectedEOF when there are some but not all.
func readFull(ra io.ReaderAt, b []byte, off int64) error {
	n, err := ra.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == io.EOF || err == nil {
		if n == 0 {
			return io.EOF
		}
		return io.ErrUnexpectedEOF
	}
	return err
}

func (fr *frameReader) readHeader() error {
	if err := readFull(fr.ra, fr.hdrBuf[:], 0); err != nil {
		return fmt.Errorf("%w: reading header: %w", ErrCorrupt, err)
	}
	h, err := ParseHeader(fr.hdrBuf[:])
	if err != nil {
		return err
	}
	fr.hdr, fr.max, fr.off = h, h.Format.FrameSize(), headerSize
	return nil
}

// reset starts reading from the first record again. A header that is
// not the one read before (the file was overwritten in place with another
// recording) is sensors.ErrFormat: the frames would not be what Format
// says.
func (fr *frameReader) reset() error {
	was := fr.hdr
	if err := fr.readHeader(); err != nil {
		return err
	}
	if fr.hdr != was {
		return fmt.Errorf("%w: the recording was replaced while it was replayed: it is %s now, it was %s", sensors.ErrFormat, fr.hdr.Format, was.Format)
	}
	return nil
}

// next reads the next record into dst; io.EOF at a clean end.
func (fr *frameReader) next(dst []byte) (Record, error) {
	rec, err := fr.nextHeader(len(dst))
	if err != nil {
		return Record{}, err
	}
	return rec, fr.body(rec, dst)
}

// nextHeader reads the next record's header; the frame's bytes follow
// (body). dstLen is the slot the frame will be read into. io.EOF at a clean
// end.
func (fr *frameReader) nextHeader(dstLen int) (Record, error) {
	if err := readFull(fr.ra, fr.rec[:], fr.off); err != nil {
		if err == io.EOF {
			return Record{}, io.EOF
		}
		return Record{}, fmt.Errorf("%w: truncated record header: %w", ErrCorrupt, err)
	}
	rec, err := parseRecord(fr.rec[:], fr.max)
	if err != nil {
		return Record{}, err
	}
	if rec.Length > dstLen {
		return Record{}, fmt.Errorf("%w: frame of %d bytes does not fit a slot of %d: the slots were sized for a recording of smaller frames (size the pool with Format().FrameSize())", sensors.ErrFormat, rec.Length, dstLen)
	}
	fr.off += recordSize
	return rec, nil
}

// body reads the frame of the record nextHeader returned into dst.
func (fr *frameReader) body(rec Record, dst []byte) error {
	var err error
	if fr.fill != nil {
		err = fr.fill.read(fr.ra, dst[:rec.Length], fr.off)
	} else {
		err = readFull(fr.ra, dst[:rec.Length], fr.off)
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: truncated frame: %w", ErrCorrupt, err)
	}
	fr.off += int64(rec.Length)
	return nil
}
