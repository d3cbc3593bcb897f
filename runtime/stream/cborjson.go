package stream

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// errCBORJSON marks CBOR that has no faithful JSON form here (a map key
// that is not a string, a malformed or too deeply nested item).
var errCBORJSON = errors.New("stream: CBOR item without a JSON form")

// maxCBORJSONDepth bounds nesting, as the decoder does.
const maxCBORJSONDepth = 32

// appendCBORJSON appends the JSON form of the CBOR data item at the start
// of src and returns the bytes after it. Maps keep their keys, in their
// order, and every value is written, zero or not: a record re-encoded from
// CBOR reads as the NDJSON encoding of the same record does. Floats are
// written as the shortest decimal of their CBOR width, NaN and infinities
// as null (docs/PROTOCOL.md).
func appendCBORJSON(dst, src []byte, depth int) ([]byte, []byte, error) {
	if depth > maxCBORJSONDepth || len(src) == 0 {
		return dst, src, errCBORJSON
	}
	major, info := src[0]>>5, src[0]&0x1f
	src = src[1:]
	if major == 7 {
		return appendCBORSimpleJSON(dst, src, info)
	}
	var n uint64
	indefinite := info == 31 && major >= 2 && major <= 5
	if !indefinite {
		var ok bool
		if n, src, ok = cborArgument(info, src); !ok {
			return dst, src, errCBORJSON
		}
	}
	switch major {
	case 0:
		return strconv.AppendUint(dst, n, 10), src, nil
	case 1: // -1 - n
		if n == math.MaxUint64 {
			return append(dst, "-18446744073709551616"...), src, nil
		}
		return strconv.AppendUint(append(dst, '-'), n+1, 10), src, nil
	case 2, 3:
		var s []byte
		var err error
		if s, src, err = cborString(major, src, n, indefinite); err != nil {
			return dst, src, err
		}
		if major == 2 { // as encoding/json writes []byte
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, s)
			return append(dst, '"'), src, nil
		}
		return appendJSONString(dst, string(s)), src, nil
	case 4, 5:
		open, close := byte('['), byte(']')
		if major == 5 {
			open, close = '{', '}'
		}
		dst = append(dst, open)
		for i := uint64(0); indefinite || i < n; i++ {
			if indefinite {
				if len(src) == 0 {
					return dst, src, errCBORJSON
				}
				if src[0] == 0xff {
					src = src[1:]
					break
				}
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if major == 5 {
				if len(src) == 0 || src[0]>>5 != 3 {
					return dst, src, errCBORJSON // JSON keys are strings
				}
				if dst, src, err = appendCBORJSON(dst, src, depth+1); err != nil {
					return dst, src, err
				}
				dst = append(dst, ':')
			}
			if dst, src, err = appendCBORJSON(dst, src, depth+1); err != nil {
				return dst, src, err
			}
		}
		return append(dst, close), src, nil
	}
	// 6: a tag; JSON has none, so the tagged item alone.
	return appendCBORJSON(dst, src, depth+1)
}

// cborString returns the content of a byte or text string whose head has
// been read (n bytes, or chunks up to a break when indefinite).
func cborString(major byte, src []byte, n uint64, indefinite bool) ([]byte, []byte, error) {
	if !indefinite {
		if uint64(len(src)) < n {
			return nil, src, errCBORJSON
		}
		return src[:n], src[n:], nil
	}
	var s []byte
	for {
		if len(src) == 0 {
			return nil, src, errCBORJSON
		}
		if src[0] == 0xff {
			return s, src[1:], nil
		}
		if src[0]>>5 != major || src[0]&0x1f == 31 {
			return nil, src, errCBORJSON
		}
		chunk, rest, err := cborChunk(src)
		if err != nil {
			return nil, rest, err
		}
		s, src = append(s, chunk...), rest
	}
}

// cborChunk returns one definite-length string chunk and the rest.
func cborChunk(src []byte) ([]byte, []byte, error) {
	n, src, ok := cborArgument(src[0]&0x1f, src[1:])
	if !ok {
		return nil, src, errCBORJSON
	}
	if uint64(len(src)) < n {
		return nil, src, errCBORJSON
	}
	return src[:n], src[n:], nil
}

// cborArgument reads the argument of a head whose first byte's low five
// bits are info, from src (the bytes after that first byte): info itself
// below 24, else the 1, 2, 4 or 8 bytes that follow. It returns the rest
// of src, or ok false (src as it was) for an indefinite length, a reserved
// value or too few bytes.
func cborArgument(info byte, src []byte) (n uint64, rest []byte, ok bool) {
	switch {
	case info < 24:
		return uint64(info), src, true
	case info <= 27:
		size := 1 << (info - 24)
		if len(src) < size {
			return 0, src, false
		}
		for _, c := range src[:size] {
			n = n<<8 | uint64(c)
		}
		return n, src[size:], true
	}
	return 0, src, false
}

// appendCBORSimpleJSON writes a major-type-7 item: false, true, null,
// undefined (as null) or a float.
func appendCBORSimpleJSON(dst, src []byte, info byte) ([]byte, []byte, error) {
	switch info {
	case 20:
		return append(dst, "false"...), src, nil
	case 21:
		return append(dst, "true"...), src, nil
	case 22, 23:
		return append(dst, "null"...), src, nil
	case 25:
		if len(src) < 2 {
			return dst, src, errCBORJSON
		}
		return appendJSONFloat32(dst, halfToFloat32(binary.BigEndian.Uint16(src))), src[2:], nil
	case 26:
		if len(src) < 4 {
			return dst, src, errCBORJSON
		}
		return appendJSONFloat32(dst, math.Float32frombits(binary.BigEndian.Uint32(src))), src[4:], nil
	case 27:
		if len(src) < 8 {
			return dst, src, errCBORJSON
		}
		return appendJSONFloat64(dst, math.Float64frombits(binary.BigEndian.Uint64(src))), src[8:], nil
	}
	return dst, src, errCBORJSON
}

// halfToFloat32 widens an IEEE 754 half-precision float.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp, frac := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch exp {
	case 0: // zero or subnormal: frac × 2^-24
		f := float32(math.Ldexp(float64(frac), -24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}
