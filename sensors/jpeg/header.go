package jpeg

import "fmt"

// SOF markers (ITU-T T.81 table B.1): the coding process a frame declares.
const (
	SOFBaseline    = 0xc0
	SOFExtended    = 0xc1
	SOFProgressive = 0xc2
)

// MaxSide is the largest width or height a JPEG frame can declare (16 bits).
const MaxSide = 1<<16 - 1

// ParseHeader reads what a JPEG stream declares before its first scan:
// the frame's size, precision, components and coding process (its SOF),
// without decoding anything and without allocating. It walks the marker
// segments from SOI to the first SOS, so a frame it accepts has one SOF
// before its scan and segment lengths that stay inside src.
//
// It is the one judgement of what edged decodes, applied before any
// backend sees a frame ([Decoder.Header], [Decoder.Decode]): the backends
// disagree on what they support (image/jpeg decodes CMYK and refuses
// arithmetic coding; libjpeg-turbo does the reverse; nvJPEG has its own
// list), so a frame that one of them would decode and another drop is
// refused on every backend with the same error, [ErrUnsupported], before
// any of them sees it. Supported is what all of them decode: baseline,
// extended sequential or progressive Huffman coding, 8-bit samples, one
// component (grey) or three (YCbCr or RGB) with the chroma subsampling
// image/jpeg handles (4:4:4, 4:4:0, 4:2:2, 4:2:0, 4:1:1, 4:1:0). Errors
// wrap ErrCorrupt; refusals of a well-formed frame edged does not decode
// wrap ErrUnsupported too.
func ParseHeader(src []byte) (Header, error) {
	if len(src) < 4 || src[0] != 0xff || src[1] != mSOI {
		return Header{}, fmt.Errorf("%w: no SOI marker", ErrCorrupt)
	}
	var h Header
	i := 2
	for {
		if i >= len(src) || src[i] != 0xff {
			return Header{}, fmt.Errorf("%w: expected a marker at byte %d", ErrCorrupt, i)
		}
		for i < len(src) && src[i] == 0xff { // fill bytes
			i++
		}
		if i >= len(src) {
			return Header{}, fmt.Errorf("%w: truncated before SOS", ErrCorrupt)
		}
		m := src[i]
		i++
		if m >= 0xd0 && m <= 0xd7 { // RSTn: no length; both libraries skip it
			continue
		}
		if m == mSOS {
			if h.SOF == 0 {
				return Header{}, fmt.Errorf("%w: SOS before any SOF", ErrCorrupt)
			}
			return h, nil
		}
		if m == mEOI || m == mSOI || m == 0 || m == mTEM {
			return Header{}, fmt.Errorf("%w: marker 0x%02x before SOS", ErrCorrupt, m)
		}
		if i+2 > len(src) {
			return Header{}, fmt.Errorf("%w: truncated segment 0x%02x", ErrCorrupt, m)
		}
		n := int(src[i])<<8 | int(src[i+1])
		if n < 2 || i+n > len(src) {
			return Header{}, fmt.Errorf("%w: segment 0x%02x of length %d at byte %d overruns %d bytes", ErrCorrupt, m, n, i, len(src))
		}
		seg := src[i+2 : i+n]
		i += n
		switch {
		case m == SOFBaseline || m == SOFExtended || m == SOFProgressive:
			if h.SOF != 0 {
				return Header{}, fmt.Errorf("%w: a second SOF (0x%02x) before SOS", ErrCorrupt, m)
			}
			if err := h.parseSOF(m, seg); err != nil {
				return Header{}, err
			}
		case m >= 0xc0 && m <= 0xcf && m != mDHT && m != 0xc8 && m != 0xcc:
			return Header{}, unsupported("%s (SOF%d)", sofProcess(m), m-0xc0)
		case m == 0xcc:
			return Header{}, unsupported("arithmetic coding (DAC segment)")
		case m == mDHT, m == 0xdb /* DQT */, m == 0xdd /* DRI */, m >= 0xe0 && m <= 0xef /* APPn */, m == 0xfe /* COM */ :
		case m < 0xc0:
			return Header{}, fmt.Errorf("%w: reserved marker 0x%02x", ErrCorrupt, m)
		default: // JPG, DNL, DHP, EXP, JPGn
			return Header{}, unsupported("marker 0x%02x", m)
		}
	}
}

// parseSOF checks a SOF segment's payload (after its length) as
// image/jpeg does, and fills h.
func (h *Header) parseSOF(m byte, seg []byte) error {
	if len(seg) < 6 {
		return fmt.Errorf("%w: SOF segment of %d bytes", ErrCorrupt, len(seg))
	}
	nf := int(seg[5])
	if len(seg) != 6+3*nf {
		return fmt.Errorf("%w: SOF of %d bytes for %d components", ErrCorrupt, len(seg), nf)
	}
	h.SOF, h.Precision, h.Components = m, int(seg[0]), nf
	h.Height, h.Width = int(seg[1])<<8|int(seg[2]), int(seg[3])<<8|int(seg[4])
	switch {
	case h.Precision != 8:
		return unsupported("%d-bit samples (8-bit only)", h.Precision)
	case nf == 4:
		return unsupported("4 components (CMYK or YCCK)")
	case nf != 1 && nf != 3:
		return unsupported("%d components (1 or 3 only)", nf)
	case h.Height == 0:
		return unsupported("a height set by a DNL segment")
	case h.Width == 0:
		return fmt.Errorf("%w: image width 0", ErrCorrupt)
	}
	var hs, vs [3]int
	for c := 0; c < nf; c++ {
		id, hv, tq := seg[6+3*c], seg[7+3*c], seg[8+3*c]
		for p := 0; p < c; p++ {
			if seg[6+3*p] == id {
				return fmt.Errorf("%w: component id %d repeated", ErrCorrupt, id)
			}
		}
		if tq > 3 {
			return fmt.Errorf("%w: quantisation table %d", ErrCorrupt, tq)
		}
		hs[c], vs[c] = int(hv>>4), int(hv&0x0f)
		if hs[c] < 1 || hs[c] > 4 || vs[c] < 1 || vs[c] > 4 {
			return fmt.Errorf("%w: sampling factors %dx%d", ErrCorrupt, hs[c], vs[c])
		}
		if hs[c] == 3 || vs[c] == 3 {
			return unsupported("sampling factors %dx%d", hs[c], vs[c])
		}
	}
	if nf == 3 {
		ok := vs[0] != 4 && hs[0]%hs[1] == 0 && vs[0]%vs[1] == 0 && hs[2] == hs[1] && vs[2] == vs[1]
		if !ok {
			return unsupported("chroma subsampling %dx%d,%dx%d,%dx%d", hs[0], vs[0], hs[1], vs[1], hs[2], vs[2])
		}
	}
	return nil
}

func sofProcess(m byte) string {
	switch m {
	case 0xc3:
		return "lossless coding"
	case 0xc5, 0xc6, 0xc7:
		return "hierarchical coding"
	case 0xc9, 0xca:
		return "arithmetic coding"
	case 0xcb:
		return "lossless arithmetic coding"
	}
	return "hierarchical arithmetic coding" // 0xcd, 0xce, 0xcf
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrCorrupt, ErrUnsupported, fmt.Sprintf(format, a...))
}
