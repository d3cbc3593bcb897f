package serialsrc

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/edged-dev/edged/sensors"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DecodeCOBS decodes one COBS-encoded frame (without its 0x00 delimiter)
// into dst and returns the decoded length. dst needs len(src) bytes at
// most. A zero byte inside src or a code running past the end is
// ErrMalformed.
func DecodeCOBS(dst, src []byte) (int, error) {
	n := 0
	for i := 0; i < len(src); {
		code := int(src[i])
		if code == 0 {
			return 0, ErrMalformed
		}
		i++
		end := i + code - 1
		if end > len(src) {
			return 0, ErrMalformed
		}
		for ; i < end; i++ {
			if src[i] == 0 {
				return 0, ErrMalformed
			}
			if n >= len(dst) {
				return 0, ErrMalformed
			}
			dst[n] = src[i]
			n++
		}
		if code < 0xFF && i < len(src) {
			if n >= len(dst) {
				return 0, ErrMalformed
			}
			dst[n] = 0
			n++
		}
	}
	return n, nil
}

// AppendCOBS appends the COBS encoding of src to dst (no delimiter).
func AppendCOBS(dst, src []byte) []byte {
	codeAt := len(dst)
	dst = append(dst, 0)
	code := byte(1)
	for i, b := range src {
		if b == 0 {
			dst[codeAt] = code
			codeAt = len(dst)
			dst = append(dst, 0)
			code = 1
			continue
		}
		dst = append(dst, b)
		code++
		if code == 0xFF && i != len(src)-1 {
			dst[codeAt] = code
			codeAt = len(dst)
			dst = append(dst, 0)
			code = 1
		}
	}
	dst[codeAt] = code
	return dst
}

// MaxPacket is the largest decoded packet: MaxSampleValues float32 values
// and the CRC.
const MaxPacket = 4*sensors.MaxSampleValues + 4

// ParsePacket decodes one COBS frame (without the delimiter) into
// s.Values, using scratch (at least len(frame) bytes, MaxPacket+2 is
// enough for any valid frame) for the unstuffed bytes. The payload must
// hold exactly len(names) float32 values. It sets s.Names and s.N.
func ParsePacket(frame, scratch []byte, names []string, s *sensors.Sample) error {
	if len(frame) == 0 {
		return ErrMalformed
	}
	if len(frame) > MaxPacket+MaxPacket/254+2 {
		return ErrMalformed
	}
	n, err := DecodeCOBS(scratch, frame)
	if err != nil {
		return err
	}
	p := scratch[:n]
	if len(p) < 4 {
		return ErrMalformed
	}
	body, sum := p[:len(p)-4], binary.LittleEndian.Uint32(p[len(p)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return ErrChecksum
	}
	if len(body)%4 != 0 || len(body)/4 != len(names) || len(names) > sensors.MaxSampleValues {
		return ErrMalformed
	}
	for i := range names {
		s.Values[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:])))
	}
	s.Names, s.N = names, len(names)
	return nil
}

// AppendPacket appends one complete packet carrying values to dst:
// COBS(float32 LE values ‖ CRC-32C LE) followed by the 0x00 delimiter.
func AppendPacket(dst []byte, values []float32) []byte {
	var raw [MaxPacket]byte
	p := raw[:0]
	for _, v := range values {
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(v))
	}
	p = binary.LittleEndian.AppendUint32(p, crc32.Checksum(p, castagnoli))
	return append(AppendCOBS(dst, p), 0)
}
