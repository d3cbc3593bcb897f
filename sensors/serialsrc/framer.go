package serialsrc

import (
	"bytes"
	"sync/atomic"
)

// framer splits a byte stream at a delimiter into frames of at most max
// bytes, using one fixed buffer. A frame that grows past max is dropped up
// to the next delimiter and counted in oversize.
type framer struct {
	delim    byte
	max      int
	buf      []byte
	dropping bool
	oversize *atomic.Uint64
}

func newFramer(protocol string, max int, oversize *atomic.Uint64) *framer {
	d := byte('\n')
	if protocol == COBS {
		d = 0
	}
	return &framer{delim: d, max: max, buf: make([]byte, 0, max), oversize: oversize}
}

// next consumes data up to and including the next delimiter and returns
// the frame before it, the rest of data and true; or, when data holds no
// delimiter, keeps the bytes for later and returns false. The frame is
// valid until the next call.
func (f *framer) next(data []byte) (frame, rest []byte, ok bool) {
	for {
		i := bytes.IndexByte(data, f.delim)
		if i < 0 {
			if !f.dropping {
				if len(f.buf)+len(data) > f.max {
					f.dropping = true
					f.buf = f.buf[:0]
					f.oversize.Add(1)
				} else {
					f.buf = append(f.buf, data...)
				}
			}
			return nil, nil, false
		}
		var part []byte
		part, data = data[:i], data[i+1:]
		if f.dropping {
			f.dropping = false
			continue
		}
		if len(f.buf)+len(part) > f.max {
			f.buf = f.buf[:0]
			f.oversize.Add(1)
			continue
		}
		if len(f.buf) == 0 {
			return part, data, true
		}
		f.buf = append(f.buf, part...)
		frame, f.buf = f.buf, f.buf[:0]
		return frame, data, true
	}
}
