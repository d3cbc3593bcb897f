package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Serial framing: frame = COBS(payload ‖ CRC-32C(payload) little-endian) ‖ 0x00.
//
// COBS (Cheshire and Baker, "Consistent Overhead Byte Stuffing") removes
// every zero byte from the stuffed data at a cost of at most one byte per 254,
// so 0x00 marks frame ends unambiguously and a receiver that lost bytes
// resynchronises at the next 0x00. The CRC is computed before stuffing, so
// it may contain zeros.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Framing errors reported by decoders.
var (
	// ErrCRC means a serial frame's CRC-32C did not match: bytes were lost
	// or changed on the line.
	ErrCRC = errors.New("stream: frame CRC mismatch")
	// ErrFrame means a frame is malformed (bad COBS code, too short, too
	// long, or a payload that is not a record).
	ErrFrame = errors.New("stream: malformed frame")
)

// cobsMaxLen is the largest stuffed size of n input bytes.
func cobsMaxLen(n int) int { return n + n/254 + 1 }

// appendCOBS appends the COBS encoding of src (no delimiter) to dst. Runs
// of non-zero bytes are found with bytes.IndexByte and copied whole.
func appendCOBS(dst, src []byte) []byte {
	for {
		run := src
		z := bytes.IndexByte(src, 0)
		if z >= 0 {
			run = src[:z]
		}
		for len(run) >= 0xfe { // a full block: code 0xff, 254 bytes, no implied zero
			dst = append(dst, 0xff)
			dst = append(dst, run[:0xfe]...)
			run = run[0xfe:]
		}
		dst = append(dst, byte(len(run)+1))
		dst = append(dst, run...)
		if z < 0 {
			return dst
		}
		src = src[z+1:]
	}
}

// decodeCOBS decodes src (one frame without its delimiter) in place and
// returns the decoded bytes, which alias src.
func decodeCOBS(src []byte) ([]byte, error) {
	out := 0
	for i := 0; i < len(src); {
		code := int(src[i])
		if code == 0 {
			return nil, ErrFrame
		}
		i++
		end := i + code - 1
		if end > len(src) {
			return nil, ErrFrame
		}
		for ; i < end; i++ {
			if src[i] == 0 {
				return nil, ErrFrame
			}
			src[out] = src[i]
			out++
		}
		if code < 0xff && i < len(src) {
			src[out] = 0
			out++
		}
	}
	return src[:out], nil
}

// appendSerialFrame appends COBS(payload ‖ CRC-32C LE) ‖ 0x00.
// scratch must not alias payload's backing array beyond len(payload).
func appendSerialFrame(dst, payloadWithRoom []byte) []byte {
	crc := crc32.Checksum(payloadWithRoom, castagnoli)
	p := binary.LittleEndian.AppendUint32(payloadWithRoom, crc)
	dst = appendCOBS(dst, p)
	return append(dst, 0)
}

// unframe checks a decoded (un-stuffed) frame's CRC and returns the payload.
func unframe(dec []byte) ([]byte, error) {
	if len(dec) < 5 {
		return nil, ErrFrame
	}
	n := len(dec) - 4
	if crc32.Checksum(dec[:n], castagnoli) != binary.LittleEndian.Uint32(dec[n:]) {
		return nil, ErrCRC
	}
	return dec[:n], nil
}
