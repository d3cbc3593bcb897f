package onnxproto

import (
	"errors"
	"fmt"
	"io"
)

// ErrFormat means the bytes are not an ONNX ModelProto ReadIO can read.
var ErrFormat = errors.New("onnxproto: not a readable ONNX model")

// Value is a graph input or output as the model file declares it.
type Value struct {
	Name string
	Elem int // TensorProto.DataType (DTFloat, ...); 0 when not a tensor
	// Dims are the dimensions: a fixed size, or -1 for a dynamic one,
	// whose name (dim_param, "" when none) is in Params at the same index.
	Dims   []int64
	Params []string
}

// IO is what a model's graph takes and gives.
type IO struct {
	Inputs, Outputs []Value
}

// Limits of ReadIO: more is not a model edged can serve, and bounds what
// reading a hostile file costs.
const (
	maxValues    = 4096    // graph inputs or outputs
	maxDims      = 64      // dimensions of one tensor
	maxValueInfo = 1 << 20 // bytes of one ValueInfoProto
	maxName      = 4096    // bytes of a name
)

// ReadIO reads the graph inputs (less those that are initializers, as
// ONNX Runtime lists them) and outputs of the ONNX ModelProto in r
// (size bytes), without reading the weights: it walks the protobuf
// fields, reads the value infos and the initializers' names, and skips
// everything else, so a 1 GiB model costs a few small reads per node.
func ReadIO(r io.ReaderAt, size int64) (IO, error) {
	s := &scanner{r: r, end: size}
	var res IO
	graph := false
	for s.off < s.end {
		f, w, err := s.tag()
		if err != nil {
			return IO{}, err
		}
		if f == ModelGraph && w == wireBytes {
			n, err := s.length()
			if err != nil {
				return IO{}, err
			}
			if res, err = s.graph(s.off + n); err != nil {
				return IO{}, err
			}
			graph = true
			continue
		}
		if err := s.skip(w); err != nil {
			return IO{}, err
		}
	}
	if !graph {
		return IO{}, fmt.Errorf("%w: no graph", ErrFormat)
	}
	return res, nil
}

func (s *scanner) graph(end int64) (IO, error) {
	if end > s.end {
		return IO{}, fmt.Errorf("%w: the graph runs past the end of the file", ErrFormat)
	}
	outer := s.end
	s.end = end
	defer func() { s.end = outer }()
	var res IO
	inits := map[string]bool{}
	for s.off < s.end {
		f, w, err := s.tag()
		if err != nil {
			return IO{}, err
		}
		switch {
		case (f == GraphInput || f == GraphOutput) && w == wireBytes:
			n, err := s.length()
			if err != nil {
				return IO{}, err
			}
			if n > maxValueInfo {
				return IO{}, fmt.Errorf("%w: a value info of %d bytes", ErrFormat, n)
			}
			b, err := s.bytes(n)
			if err != nil {
				return IO{}, err
			}
			v, err := parseValue(b)
			if err != nil {
				return IO{}, err
			}
			list := &res.Inputs
			if f == GraphOutput {
				list = &res.Outputs
			}
			if len(*list) >= maxValues {
				return IO{}, fmt.Errorf("%w: more than %d graph inputs or outputs", ErrFormat, maxValues)
			}
			*list = append(*list, v)
		case f == GraphInitializer && w == wireBytes:
			n, err := s.length()
			if err != nil {
				return IO{}, err
			}
			name, err := s.tensorName(s.off + n)
			if err != nil {
				return IO{}, err
			}
			inits[name] = true
		default:
			if err := s.skip(w); err != nil {
				return IO{}, err
			}
		}
	}
	ins := res.Inputs[:0]
	for _, v := range res.Inputs {
		if !inits[v.Name] {
			ins = append(ins, v)
		}
	}
	res.Inputs = ins
	return res, nil
}

// tensorName reads the name of the TensorProto that ends at end, skipping
// its data.
func (s *scanner) tensorName(end int64) (string, error) {
	if end > s.end {
		return "", fmt.Errorf("%w: an initializer runs past the graph", ErrFormat)
	}
	name := ""
	for s.off < end {
		f, w, err := s.tag()
		if err != nil {
			return "", err
		}
		if f == tensorName && w == wireBytes {
			n, err := s.length()
			if err != nil {
				return "", err
			}
			if n > maxName {
				return "", fmt.Errorf("%w: a name of %d bytes", ErrFormat, n)
			}
			b, err := s.bytes(n)
			if err != nil {
				return "", err
			}
			name = string(b)
			continue
		}
		if err := s.skip(w); err != nil {
			return "", err
		}
	}
	if s.off != end {
		return "", fmt.Errorf("%w: an initializer's fields overrun it", ErrFormat)
	}
	return name, nil
}

// parseValue decodes a ValueInfoProto held whole in b.
func parseValue(b []byte) (Value, error) {
	var v Value
	err := fields(b, func(f, w int, p []byte, x uint64) error {
		switch {
		case f == valueName && w == wireBytes:
			v.Name = string(p)
		case f == valueType && w == wireBytes:
			return fields(p, func(f, w int, p []byte, _ uint64) error {
				if f != typeTensorType || w != wireBytes {
					return nil
				}
				return fields(p, func(f, w int, p []byte, x uint64) error {
					switch {
					case f == tensorElemType && w == wireVarint:
						v.Elem = int(int32(x))
					case f == tensorShape && w == wireBytes:
						return fields(p, func(f, w int, p []byte, _ uint64) error {
							if f != shapeDim || w != wireBytes {
								return nil
							}
							if len(v.Dims) >= maxDims {
								return fmt.Errorf("%w: a tensor of more than %d dimensions", ErrFormat, maxDims)
							}
							d, param := int64(-1), ""
							err := fields(p, func(f, w int, p []byte, x uint64) error {
								switch {
								case f == dimValue && w == wireVarint:
									d = int64(x)
								case f == dimParam && w == wireBytes:
									param = string(p)
								}
								return nil
							})
							if d < 0 {
								d = -1 // a negative dim_value is not a size: dynamic
							}
							if d >= 0 {
								param = ""
							}
							v.Dims, v.Params = append(v.Dims, d), append(v.Params, param)
							return err
						})
					}
					return nil
				})
			})
		}
		return nil
	})
	return v, err
}

// fields calls fn for every field of the message b: its number, wire
// type, bytes (length-delimited) or value (varint).
func fields(b []byte, fn func(field, wire int, p []byte, x uint64) error) error {
	for i := 0; i < len(b); {
		tag, n := uvarint(b[i:])
		if n <= 0 {
			return fmt.Errorf("%w: a bad field tag", ErrFormat)
		}
		i += n
		f, w := int(tag>>3), int(tag&7)
		var p []byte
		var x uint64
		switch w {
		case wireVarint:
			if x, n = uvarint(b[i:]); n <= 0 {
				return fmt.Errorf("%w: a bad varint", ErrFormat)
			}
			i += n
		case wireBytes:
			l, n := uvarint(b[i:])
			if n <= 0 || l > uint64(len(b)-i-n) {
				return fmt.Errorf("%w: a field of %d bytes overruns its message", ErrFormat, l)
			}
			i += n
			p = b[i : i+int(l)]
			i += int(l)
		case 1: // 64-bit
			if len(b)-i < 8 {
				return fmt.Errorf("%w: a truncated 64-bit field", ErrFormat)
			}
			i += 8
		case 5: // 32-bit
			if len(b)-i < 4 {
				return fmt.Errorf("%w: a truncated 32-bit field", ErrFormat)
			}
			i += 4
		default:
			return fmt.Errorf("%w: wire type %d", ErrFormat, w)
		}
		if f == 0 {
			return fmt.Errorf("%w: field number 0", ErrFormat)
		}
		if err := fn(f, w, p, x); err != nil {
			return err
		}
	}
	return nil
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// scanner reads protobuf fields from r sequentially through a window, and
// skips a field's bytes without reading them.
type scanner struct {
	r        io.ReaderAt
	off, end int64
	buf      []byte
	bufOff   int64 // file offset of buf[0]
}

const window = 64 << 10

// peek returns at least n bytes at s.off (fewer at the end of the file).
func (s *scanner) peek(n int) ([]byte, error) {
	if s.off >= s.bufOff && s.off+int64(n) <= s.bufOff+int64(len(s.buf)) {
		return s.buf[s.off-s.bufOff:], nil
	}
	if s.buf == nil {
		s.buf = make([]byte, window)
	}
	s.buf = s.buf[:cap(s.buf)]
	k, err := s.r.ReadAt(s.buf, s.off)
	if k == 0 && err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: truncated at byte %d", ErrFormat, s.off)
		}
		return nil, err
	}
	s.buf, s.bufOff = s.buf[:k], s.off
	return s.buf, nil
}

func (s *scanner) varint() (uint64, error) {
	b, err := s.peek(10)
	if err != nil {
		return 0, err
	}
	x, n := uvarint(b[:min(len(b), int(s.end-s.off))])
	if n <= 0 {
		return 0, fmt.Errorf("%w: a bad varint at byte %d", ErrFormat, s.off)
	}
	s.off += int64(n)
	return x, nil
}

func (s *scanner) tag() (field, wire int, err error) {
	t, err := s.varint()
	if err != nil {
		return 0, 0, err
	}
	if t>>3 == 0 || t>>3 > 1<<29 {
		return 0, 0, fmt.Errorf("%w: field number %d", ErrFormat, t>>3)
	}
	return int(t >> 3), int(t & 7), nil
}

// length reads a length-delimited field's length and checks it against
// what is left.
func (s *scanner) length() (int64, error) {
	n, err := s.varint()
	if err != nil {
		return 0, err
	}
	if n > uint64(s.end-s.off) {
		return 0, fmt.Errorf("%w: a field of %d bytes at byte %d runs past its message", ErrFormat, n, s.off)
	}
	return int64(n), nil
}

// bytes returns the next n bytes (n is bounded by the caller).
func (s *scanner) bytes(n int64) ([]byte, error) {
	b := make([]byte, n)
	if k, err := s.r.ReadAt(b, s.off); int64(k) < n {
		if err == nil || err == io.EOF {
			return nil, fmt.Errorf("%w: truncated at byte %d", ErrFormat, s.off)
		}
		return nil, fmt.Errorf("%w: at byte %d: %w", ErrFormat, s.off, err)
	}
	s.off += n
	return b, nil
}

// skip passes over the rest of a field of wire type w.
func (s *scanner) skip(w int) error {
	switch w {
	case wireVarint:
		_, err := s.varint()
		return err
	case wireBytes:
		n, err := s.length()
		s.off += n
		return err
	case 1, 5:
		n := int64(8)
		if w == 5 {
			n = 4
		}
		if s.end-s.off < n {
			return fmt.Errorf("%w: truncated at byte %d", ErrFormat, s.off)
		}
		s.off += n
		return nil
	}
	return fmt.Errorf("%w: wire type %d at byte %d", ErrFormat, w, s.off)
}

// ElemSize is the size in bytes of one element of TensorProto.DataType
// elem; 0 for types without a fixed size (string) or unknown ones.
func ElemSize(elem int) int {
	switch elem {
	case DTUint8, DTInt8, DTBool:
		return 1
	case 4, 5, DTFloat16, 16: // uint16, int16, float16, bfloat16
		return 2
	case DTFloat, DTInt32, 12: // float, int32, uint32
		return 4
	case DTInt64, 11, 13: // int64, double, uint64
		return 8
	}
	return 0
}
