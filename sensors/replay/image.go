package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/edged-dev/edged/internal/regfile"
	"github.com/edged-dev/edged/sensors/jpeg"
)

// Image kinds an image folder holds, told by content (not by the name).
const (
	kindPNG  = "PNG"
	kindJPEG = "JPEG"
)

// pngSignature starts every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// pngHeaderSize is the signature and the IHDR chunk (length, type, 13
// bytes, CRC): what a PNG declares before any pixel.
const pngHeaderSize = 8 + 8 + 13 + 4

// errImage is the error of an image file edged does not decode: a header
// that is not well formed, a kind other than PNG or JPEG, a feature a
// decoder does not support, a size larger than the limit.
var errImage = errors.New("not a usable image")

// imageHeader is what an image file declares before its pixels.
type imageHeader struct {
	Kind          string // kindPNG or kindJPEG
	Width, Height int
}

// parseImageHeader reads an image's header from the start of its file:
// the PNG signature and IHDR chunk, or a JPEG's markers up to its first
// scan (jpeg.ParseHeader). The size it returns is the one the decoder
// allocates for, so it is compared with the folder's geometry before
// anything is decoded. Nothing is allocated on success.
func parseImageHeader(b []byte) (imageHeader, error) {
	switch {
	case len(b) >= 8 && string(b[:8]) == pngSignature:
		w, h, err := parsePNGHeader(b)
		return imageHeader{Kind: kindPNG, Width: w, Height: h}, err
	case len(b) >= 2 && b[0] == 0xff && b[1] == 0xd8:
		h, err := jpeg.ParseHeader(b)
		if err != nil {
			return imageHeader{}, fmt.Errorf("%w: %w", errImage, err)
		}
		return imageHeader{Kind: kindJPEG, Width: h.Width, Height: h.Height}, nil
	}
	return imageHeader{}, fmt.Errorf("%w: neither a PNG nor a JPEG file (it starts %q)", errImage, b[:min(len(b), 8)])
}

// parsePNGHeader checks a PNG's IHDR as image/png does (chunk length and
// CRC, bit depth for the colour type, compression, filter and interlace
// methods) and returns the size it declares.
func parsePNGHeader(b []byte) (int, int, error) {
	bad := func(format string, a ...any) (int, int, error) {
		return 0, 0, fmt.Errorf("%w: PNG: %s", errImage, fmt.Sprintf(format, a...))
	}
	if len(b) < pngHeaderSize {
		return bad("%d bytes, shorter than a PNG header", len(b))
	}
	be := binary.BigEndian
	if n := be.Uint32(b[8:]); n != 13 || string(b[12:16]) != "IHDR" {
		return bad("the first chunk is %q of %d bytes, not IHDR of 13", b[12:16], n)
	}
	if crc := crc32.ChecksumIEEE(b[12:29]); crc != be.Uint32(b[29:]) {
		return bad("IHDR checksum mismatch")
	}
	w, h := be.Uint32(b[16:]), be.Uint32(b[20:])
	depth, color := b[24], b[25]
	if w == 0 || h == 0 || w > 1<<31-1 || h > 1<<31-1 {
		return bad("size %dx%d", w, h)
	}
	okDepth := false
	switch color {
	case 0: // grey
		okDepth = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16
	case 3: // palette
		okDepth = depth == 1 || depth == 2 || depth == 4 || depth == 8
	case 2, 4, 6: // RGB, grey + alpha, RGBA
		okDepth = depth == 8 || depth == 16
	default:
		return bad("colour type %d", color)
	}
	if !okDepth {
		return bad("bit depth %d for colour type %d", depth, color)
	}
	if b[26] != 0 || b[27] != 0 || b[28] > 1 {
		return bad("compression, filter or interlace method %d, %d, %d", b[26], b[27], b[28])
	}
	return int(w), int(h), nil
}

// imageFileLimit is the largest image file of a w×h folder read whole:
// eight bytes a pixel (16-bit RGBA stored without compression) and 4 MiB
// of metadata. A larger file cannot be an image of that size and is not
// read.
func imageFileLimit(w, h int) int64 { return 8*int64(w)*int64(h) + 4<<20 }

// readImage reads path whole into buf (grown as needed, up to limit) and
// returns the bytes. A file larger than limit is refused unread.
func readImage(path string, limit int64, buf []byte) ([]byte, error) {
	f, err := openImage(path)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buf[:0], err
	}
	if !st.Mode().IsRegular() {
		return buf[:0], fmt.Errorf("%w: %s is not a regular file", errImage, path)
	}
	if st.Size() > limit {
		return buf[:0], fmt.Errorf("%w: %s: %d bytes, more than an image of the folder's size can take (%d)", errImage, path, st.Size(), limit)
	}
	n := int(st.Size())
	if cap(buf) < n+1 {
		buf = make([]byte, n+1)
	}
	buf = buf[:n+1] // one more: a file that grew since Stat is seen
	k, err := io.ReadFull(f, buf)
	switch {
	case err == nil:
		return buf[:0], fmt.Errorf("%w: %s grew while it was read", errImage, path)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return buf[:k], nil
	}
	return buf[:0], err
}

// openImage opens an image of the folder without blocking on it
// (regfile): a FIFO or a device among the images is refused at once, as
// an image that cannot be replayed.
func openImage(path string) (*os.File, error) {
	f, _, err := regfile.Open(path, regfile.NoLimit)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %w", errImage, err)
	}
	return f, err
}

// headerReadLimit is how much of a file readImageHeader reads: a JPEG's
// markers before its first scan (tables, EXIF) fit in it.
const headerReadLimit = 1 << 20

// readImageHeader reads the header of the image at path from its first
// bytes (at most headerReadLimit).
func readImageHeader(path string) (imageHeader, error) {
	f, err := openImage(path)
	if err != nil {
		return imageHeader{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, headerReadLimit))
	if err != nil {
		return imageHeader{}, err
	}
	h, err := parseImageHeader(b)
	if err != nil {
		return imageHeader{}, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
