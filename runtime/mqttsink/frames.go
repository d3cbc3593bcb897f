package mqttsink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
)

// A queue frame:
//
//	length   uint32 big-endian: bytes of payload (at most MaxPayload)
//	seq      uint64 big-endian: the record's sequence number
//	crc      uint32 big-endian: CRC-32C of seq and payload
//	payload  length bytes

const (
	frameHeader = 16
	// MaxPayload is the largest payload a frame may carry: a longer record
	// is refused by Append, and a length above it read back is damage.
	MaxPayload = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends one frame carrying seq and payload to dst.
func AppendFrame(dst []byte, seq uint64, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	at := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	crc := crc32.Update(crc32.Checksum(dst[at:], castagnoli), castagnoli, payload)
	dst = binary.BigEndian.AppendUint32(dst, crc)
	return append(dst, payload...)
}

// ParseFrame reads the frame at the start of b: its seq, its payload (a
// slice of b) and its length n in b. An incomplete or damaged frame is
// ErrCorrupt.
func ParseFrame(b []byte) (seq uint64, payload []byte, n int, err error) {
	if len(b) < frameHeader {
		return 0, nil, 0, fmt.Errorf("%w: %d bytes, a frame header is %d", ErrCorrupt, len(b), frameHeader)
	}
	size := binary.BigEndian.Uint32(b)
	if size > MaxPayload || int64(size) > int64(len(b)-frameHeader) {
		return 0, nil, 0, fmt.Errorf("%w: length %d with %d bytes left", ErrCorrupt, size, len(b)-frameHeader)
	}
	seq = binary.BigEndian.Uint64(b[4:])
	payload = b[frameHeader : frameHeader+int(size)]
	crc := crc32.Update(crc32.Checksum(b[4:12], castagnoli), castagnoli, payload)
	if crc != binary.BigEndian.Uint32(b[12:]) {
		return 0, nil, 0, fmt.Errorf("%w: CRC mismatch at seq %d", ErrCorrupt, seq)
	}
	return seq, payload, frameHeader + int(size), nil
}

// frameReader reads the frames of one segment: a file or memory, through
// a read-ahead window so that walking a segment is a few large reads.
// Every length is checked against MaxPayload and the bytes left before
// anything is allocated for it.
type frameReader struct {
	r    io.ReaderAt
	size int64  // bytes of the segment
	buf  []byte // window
	at   int64  // offset of buf[0]
	n    int    // valid bytes in buf
	big  []byte // a frame larger than the window
}

const readAhead = 64 << 10

func newFrameReader(r io.ReaderAt, size int64, buf []byte) *frameReader {
	if cap(buf) < readAhead {
		buf = make([]byte, readAhead)
	}
	return &frameReader{r: r, size: size, buf: buf[:readAhead], at: -1}
}

// bytes returns n bytes at off (valid until the next call).
func (fr *frameReader) bytes(off int64, n int) ([]byte, error) {
	if off < 0 || off+int64(n) > fr.size {
		return nil, io.ErrUnexpectedEOF
	}
	if n > len(fr.buf) {
		fr.big = slices.Grow(fr.big[:0], n)[:n]
		if _, err := fr.r.ReadAt(fr.big, off); err != nil {
			return nil, err
		}
		return fr.big, nil
	}
	if fr.at < 0 || off < fr.at || off+int64(n) > fr.at+int64(fr.n) {
		want := int(min(int64(len(fr.buf)), fr.size-off))
		k, err := fr.r.ReadAt(fr.buf[:want], off)
		if k < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			fr.at = -1
			return nil, err
		}
		fr.at, fr.n = off, k
	}
	i := int(off - fr.at)
	return fr.buf[i : i+n], nil
}

// frame reads and checks the frame at off: its seq, payload and length.
// errCorruptHere is a frame that does not check; any other error is the
// reader's.
func (fr *frameReader) frame(off int64) (seq uint64, payload []byte, n int, err error) {
	hdr, err := fr.bytes(off, frameHeader)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, 0, fmt.Errorf("%w: %d bytes left at %d, a frame header is %d", ErrCorrupt, fr.size-off, off, frameHeader)
		}
		return 0, nil, 0, err
	}
	size := int64(binary.BigEndian.Uint32(hdr))
	if size > MaxPayload || off+frameHeader+size > fr.size {
		return 0, nil, 0, fmt.Errorf("%w: length %d at %d with %d bytes left", ErrCorrupt, size, off, fr.size-off-frameHeader)
	}
	b, err := fr.bytes(off, frameHeader+int(size))
	if err != nil {
		return 0, nil, 0, err
	}
	return ParseFrame(b)
}

// resync finds the first offset after from where a frame checks whose seq
// lies in (prev, limit): after a damaged frame, the next intact one. The
// length must fit what is left, the seq must follow the last good one and
// precede what is known to come after, and the CRC must match, so a
// stretch of damage costs the records in it and no more. ok is false when
// none follows (a torn tail).
func (fr *frameReader) resync(from int64, prev, limit uint64) (int64, bool) {
	for off := from; off+frameHeader <= fr.size; off++ {
		hdr, err := fr.bytes(off, frameHeader)
		if err != nil {
			return 0, false
		}
		size := int64(binary.BigEndian.Uint32(hdr))
		seq := binary.BigEndian.Uint64(hdr[4:])
		if size > MaxPayload || off+frameHeader+size > fr.size || seq <= prev || seq >= limit {
			continue
		}
		if s, _, _, err := fr.frame(off); err == nil && s == seq {
			return off, true
		}
	}
	return 0, false
}

// hole is a stretch of a segment that holds no intact frame: damage the
// reader steps over.
type hole struct{ off, end int64 }

// scanResult is what walking a segment found.
type scanResult struct {
	first, last uint64 // seqs of the first and last intact frame (count > 0)
	count       int    // intact frames
	end         int64  // offset after the last intact frame
	holes       []hole // damaged stretches before end
	torn        int64  // bytes after end with no intact frame in them
}

// scan walks every frame of the segment, stepping over damage: a frame
// that does not check, or whose seq does not follow (prev, limit), starts
// a hole that ends at the next frame that does (resync). What follows the
// last intact frame is torn: a frame cut by a power cut, or junk.
func (fr *frameReader) scan(prev, limit uint64) (scanResult, error) {
	var r scanResult
	for off := int64(0); off < fr.size; {
		seq, _, n, err := fr.frame(off)
		if err == nil && seq > prev && seq < limit {
			if r.count == 0 {
				r.first = seq
			}
			r.last, prev = seq, seq
			r.count++
			off += int64(n)
			r.end = off
			continue
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return r, err
		}
		next, ok := fr.resync(off+1, prev, limit)
		if !ok {
			break
		}
		r.holes = append(r.holes, hole{off, next})
		off = next
	}
	r.torn = fr.size - r.end
	return r, nil
}

// noLimit is the limit of a segment nothing is known to follow.
const noLimit = math.MaxUint64
