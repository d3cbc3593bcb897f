package h26x

import (
	"errors"
	"fmt"
)

// Errors of this package. Every error the parsers and the depacketizer
// return wraps one of them.
var (
	// ErrMalformed: the bytes do not follow the syntax (a truncated SPS, an
	// aggregation packet whose sizes overrun it, an Exp-Golomb code too long).
	ErrMalformed = errors.New("h26x: malformed")
	// ErrUnsupported: well-formed, but edged does not handle it (STAP-B,
	// MTAP, FU-B, PACI, interleaved H.265 with DON fields).
	ErrUnsupported = errors.New("h26x: unsupported")
)

// Codec is a video codec edged depacketizes and decodes.
type Codec uint8

// The codecs.
const (
	H264 Codec = iota + 1
	H265
)

func (c Codec) String() string {
	switch c {
	case H264:
		return "h264"
	case H265:
		return "h265"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// H.264 NAL unit types (ITU-T H.264 table 7-1, RFC 6184 table 1).
const (
	nal264Slice = 1
	nal264IDR   = 5
	nal264SEI   = 6
	nal264SPS   = 7
	nal264PPS   = 8
	nal264AUD   = 9
	nal264STAPA = 24
	nal264STAPB = 25
	nal264MTAP1 = 26
	nal264MTAP2 = 27
	nal264FUA   = 28
	nal264FUB   = 29
)

// H.265 NAL unit types (ITU-T H.265 table 7-1, RFC 7798 section 4.4).
const (
	nal265RASLN  = 8
	nal265RASLR  = 9
	nal265BLAWLP = 16
	nal265IDRWR  = 19
	nal265IDRNLP = 20
	nal265CRA    = 21
	nal265IRAPHi = 23 // 22 and 23 are reserved IRAP types
	nal265VPS    = 32
	nal265SPS    = 33
	nal265PPS    = 34
	nal265AUD    = 35
	nal265AP     = 48
	nal265FU     = 49
	nal265PACI   = 50
)

// NALType is the type of the NAL unit nal (its header first, no start
// code); -1 when nal is too short to have a header.
func (c Codec) NALType(nal []byte) int {
	switch {
	case c == H264 && len(nal) >= 1:
		return int(nal[0] & 0x1f)
	case c == H265 && len(nal) >= 2:
		return int(nal[0]>>1) & 0x3f
	}
	return -1
}

// headerLen is the NAL unit header's size: 1 byte (H.264) or 2 (H.265).
func (c Codec) headerLen() int {
	if c == H265 {
		return 2
	}
	return 1
}

// isVCL reports whether NAL type t carries slice data.
func (c Codec) isVCL(t int) bool {
	if c == H264 {
		return t >= 1 && t <= 5
	}
	return t >= 0 && t <= 31
}

// isRandomAccess reports whether VCL NAL type t starts a picture a decoder
// can begin at: IDR for H.264; BLA, IDR or CRA (IRAP) for H.265.
func (c Codec) isRandomAccess(t int) bool {
	if c == H264 {
		return t == nal264IDR
	}
	return t >= nal265BLAWLP && t <= nal265IRAPHi
}

// isSPS, isParam: parameter set NAL types.
func (c Codec) isSPS(t int) bool {
	if c == H264 {
		return t == nal264SPS
	}
	return t == nal265SPS
}

func (c Codec) isParam(t int) bool {
	if c == H264 {
		return t == nal264SPS || t == nal264PPS
	}
	return t >= nal265VPS && t <= nal265PPS
}
