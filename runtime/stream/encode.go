package stream

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Encoding is a wire encoding of records.
type Encoding uint8

// Encodings.
const (
	// NDJSON is one JSON object per line.
	NDJSON Encoding = iota + 1
	// CBOR is, on a socket, a 4-byte big-endian length followed by one CBOR
	// map; on a serial port the CBOR map is the payload of a COBS frame.
	CBOR
)

func (e Encoding) String() string {
	switch e {
	case NDJSON:
		return "ndjson"
	case CBOR:
		return "cbor"
	}
	return "unknown"
}

// ParseEncoding accepts "ndjson" and "cbor" ("" means NDJSON).
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "", "ndjson", "json":
		return NDJSON, nil
	case "cbor":
		return CBOR, nil
	}
	return 0, fmt.Errorf("stream: unknown encoding %q (use \"ndjson\" or \"cbor\")", s)
}

// MaxCBORMessage is the largest length-prefixed CBOR message on a socket.
// Keeping it below 2^24 makes the first byte of every CBOR frame 0x00, which
// is how a reader tells it from an NDJSON line (which starts with '{').
const MaxCBORMessage = 1<<24 - 1

// AppendNDJSON appends r as one NDJSON line (with its newline) carrying seq.
func AppendNDJSON(dst []byte, r *Record, seq uint64) []byte {
	dst = append(dst, jsonHead(r.Kind)...)
	dst = strconv.AppendUint(dst, seq, 10)
	return appendJSONBody(dst, r, levelFull)
}

// AppendCBOR appends r as one CBOR map carrying seq (no length prefix).
func AppendCBOR(dst []byte, r *Record, seq uint64) []byte {
	dst = appendCBORHeadPart(dst, r, levelFull)
	dst = appendCBORHead(dst, cborUint, seq)
	return appendCBORBody(dst, r, levelFull)
}

// AppendSerialFrame appends r as one serial frame:
// COBS(CBOR ‖ CRC-32C little-endian) ‖ 0x00. scratch is reused for the
// unstuffed payload and returned for the next call.
func AppendSerialFrame(dst, scratch []byte, r *Record, seq uint64) (frame, scratchOut []byte) {
	scratch = AppendCBOR(scratch[:0], r, seq)
	return appendSerialFrame(dst, scratch), scratch
}

// AppendSerialPayload appends r with seq as a serial port carries it before
// framing: an NDJSON line (ndjson), else the CBOR map that FrameSerial
// frames. It summarises r as Encoded.Encode does until the result fits in
// limit bytes on the line: the line itself, or the frame COBS stuffing and
// the CRC make of the map. It reports whether r was summarised, or
// ok=false when even the smallest form does not fit.
func AppendSerialPayload(dst []byte, r *Record, seq uint64, ndjson bool, limit int) (payload []byte, summarised, ok bool) {
	start := len(dst)
	for level := levelFull; level < levelCount; level++ {
		if r.Kind != KindResult && level > levelFull {
			break
		}
		dst = dst[:start]
		if ndjson {
			dst = append(dst, jsonHead(r.Kind)...)
			dst = strconv.AppendUint(dst, seq, 10)
			dst = appendJSONBody(dst, r, level)
			ok = len(dst)-start <= limit
		} else {
			dst = appendCBORHeadPart(dst, r, level)
			dst = appendCBORHead(dst, cborUint, seq)
			dst = appendCBORBody(dst, r, level)
			ok = cobsMaxLen(len(dst)-start+4)+1 <= limit
		}
		if ok {
			return dst, level > levelFull, true
		}
	}
	return dst, false, false
}

// FrameSerial appends the serial frame of a CBOR payload to dst:
// COBS(payload ‖ CRC-32C little-endian) ‖ 0x00. The CRC is appended to
// payload's own buffer (its capacity is reused).
func FrameSerial(dst, payload []byte) []byte { return appendSerialFrame(dst, payload) }

// Encoded is one published record, encoded once and shared by every
// consumer it goes to. The encodings stop short of the seq value, which
// each consumer splices in at write time (AppendWire), so one encoding
// serves streams with their own seq counters.
type Encoded struct {
	kind Kind

	json     []byte // NDJSON body after the seq digits (empty when not needed)
	cborHead []byte // CBOR map header up to the "seq" key
	cborBody []byte // CBOR pairs after the seq value
}

// encode fills e with the encodings in need, summarising r until each fits
// in limit bytes (0: no limit). It reports the level used, or ok=false when
// even the smallest form does not fit.
func (e *Encoded) encode(r *Record, needJSON, needCBOR bool, limit int) (level int, ok bool) {
	e.kind = r.Kind
	for level = levelFull; level < levelCount; level++ {
		if r.Kind != KindResult && level > levelFull {
			break
		}
		fits := true
		e.json, e.cborHead, e.cborBody = e.json[:0], e.cborHead[:0], e.cborBody[:0]
		if needJSON {
			e.json = appendJSONBody(e.json, r, level)
			// head + up to 20 seq digits + body
			if limit > 0 && len(jsonHead(r.Kind))+20+len(e.json) > limit {
				fits = false
			}
		}
		if needCBOR && fits {
			e.cborHead = appendCBORHeadPart(e.cborHead, r, level)
			e.cborBody = appendCBORBody(e.cborBody, r, level)
			if limit > 0 && 4+len(e.cborHead)+9+len(e.cborBody) > limit {
				fits = false
			}
		}
		if fits {
			return level, true
		}
	}
	return level, false
}

// Encode fills e with the encodings in need (NDJSON, CBOR), summarising r
// until each fits in limit bytes (0: no limit): raw outputs first lose
// their data, then outputs and sensors are dropped, the record marked
// "truncated". It reports whether r was summarised, or ok=false when even
// the smallest form does not fit. e keeps no reference to r and reuses its
// buffers.
func (e *Encoded) Encode(r *Record, needJSON, needCBOR bool, limit int) (summarised, ok bool) {
	level, ok := e.encode(r, needJSON, needCBOR, limit)
	return level > levelFull, ok
}

// WireSize is an upper bound of e's size on the wire in enc.
func (e *Encoded) WireSize(enc Encoding) int {
	if enc == CBOR {
		return 4 + len(e.cborHead) + 9 + len(e.cborBody)
	}
	return len(jsonHeadResult) + 20 + len(e.json)
}

// CapBytes is the buffer capacity e holds.
func (e *Encoded) CapBytes() int { return cap(e.json) + cap(e.cborHead) + cap(e.cborBody) }

// AppendWire appends e as it goes to one client: the spliced record in enc
// with seq, with the 4-byte length prefix for CBOR.
func (e *Encoded) AppendWire(dst []byte, enc Encoding, seq uint64) []byte {
	if enc == CBOR {
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = append(dst, e.cborHead...)
		dst = appendCBORHead(dst, cborUint, seq)
		dst = append(dst, e.cborBody...)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
		return dst
	}
	dst = append(dst, jsonHead(e.kind)...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, e.json...)
}
