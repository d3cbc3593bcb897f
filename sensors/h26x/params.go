package h26x

import (
	"bytes"
	"fmt"
)

// PPS is what edged reads from a picture parameter set: its identity and
// the SPS it refers to.
type PPS struct {
	ID, SPSID int
}

// ParsePPS parses a picture parameter set NAL unit of codec c.
func ParsePPS(c Codec, nal []byte) (PPS, error) {
	var p PPS
	var r bitReader
	switch {
	case c == H264 && c.NALType(nal) == nal264PPS:
		r = newBitReader(nal[1:])
		p.ID, p.SPSID = int(r.ueMax(255)), int(r.ueMax(31))
	case c == H265 && c.NALType(nal) == nal265PPS:
		r = newBitReader(nal[2:])
		p.ID, p.SPSID = int(r.ueMax(63)), int(r.ueMax(15))
	default:
		return p, malformed(c, "PPS: not a PPS NAL unit")
	}
	if r.err {
		return p, malformed(c, "PPS: truncated")
	}
	return p, nil
}

// VPS is what edged reads from an H.265 video parameter set.
type VPS struct {
	ID, MaxSubLayers int
}

// ParseVPS parses an H.265 video parameter set NAL unit.
func ParseVPS(nal []byte) (VPS, error) {
	var v VPS
	if H265.NALType(nal) != nal265VPS {
		return v, malformed(H265, "VPS: not a VPS NAL unit")
	}
	r := newBitReader(nal[2:])
	v.ID = int(r.u(4))
	r.skip(2) // vps_base_layer_internal_flag, vps_base_layer_available_flag
	r.skip(6) // vps_max_layers_minus1
	sub := r.u(3)
	r.skip(1)  // vps_temporal_id_nesting_flag
	r.skip(16) // vps_reserved_0xffff_16bits
	if sub > 6 {
		return v, malformed(H265, "VPS: vps_max_sub_layers_minus1 over 6")
	}
	profileTierLevel(&r, sub)
	if r.err {
		return v, malformed(H265, "VPS: truncated")
	}
	v.MaxSubLayers = int(sub) + 1
	return v, nil
}

// Params are a stream's parameter sets out of band (the SDP's
// sprop-parameter-sets, or sprop-vps/sps/pps), checked.
type Params struct {
	Codec Codec
	SPS   SPS
	// AnnexB holds every parameter set behind a 4-byte start code, in the
	// order a decoder needs them (VPS, SPS, PPS): what decoders take as
	// extradata.
	AnnexB []byte
}

// CheckParams parses the parameter sets nals of codec c (no start codes)
// and returns them as Annex-B with the SPS parsed. It needs one SPS and
// one PPS (and for H.265 one VPS); every one must parse.
func CheckParams(c Codec, nals [][]byte) (Params, error) {
	p := Params{Codec: c}
	var vps, sps, pps [][]byte
	for _, n := range nals {
		if !wellFormedNAL(n) {
			return p, fmt.Errorf("%w: %s: a parameter set holds a start code or ends in a zero byte", ErrMalformed, c)
		}
		t := c.NALType(n)
		switch {
		case c == H265 && t == nal265VPS:
			if _, err := ParseVPS(n); err != nil {
				return p, err
			}
			vps = append(vps, n)
		case c.isSPS(t):
			s, err := ParseSPS(c, n)
			if err != nil {
				return p, err
			}
			if len(sps) == 0 {
				p.SPS = s
			}
			sps = append(sps, n)
		case (c == H264 && t == nal264PPS) || (c == H265 && t == nal265PPS):
			if _, err := ParsePPS(c, n); err != nil {
				return p, err
			}
			pps = append(pps, n)
		default:
			return p, fmt.Errorf("%w: %s: NAL unit type %d is not a parameter set", ErrMalformed, c, t)
		}
	}
	if len(sps) == 0 || len(pps) == 0 || (c == H265 && len(vps) == 0) {
		want := "an SPS and a PPS"
		if c == H265 {
			want = "a VPS, an SPS and a PPS"
		}
		return p, fmt.Errorf("%w: %s parameter sets need %s (got %d VPS, %d SPS, %d PPS)", ErrMalformed, c, want, len(vps), len(sps), len(pps))
	}
	var b bytes.Buffer
	for _, set := range [][][]byte{vps, sps, pps} {
		for _, n := range set {
			b.Write(startCode[:])
			b.Write(n)
		}
	}
	p.AnnexB = b.Bytes()
	return p, nil
}

var startCode = [4]byte{0, 0, 0, 1}

// wellFormedNAL reports whether n can stand behind a start code: no 00 00
// 00, 00 00 01 or 00 00 02 inside it (emulation prevention rules them
// out), and a last byte that is not zero (it holds the stop bit).
func wellFormedNAL(n []byte) bool {
	if len(n) == 0 || n[len(n)-1] == 0 {
		return false
	}
	for i := 0; i+2 < len(n); i++ {
		if n[i] == 0 && n[i+1] == 0 && n[i+2] <= 2 {
			return false
		}
	}
	return true
}

// SplitAnnexB calls f for each NAL unit of an Annex-B stream b (start codes
// of three or four bytes; the NAL units without them), in order, until f
// returns false.
func SplitAnnexB(b []byte, f func(nal []byte) bool) {
	i := nextStart(b, 0)
	for i >= 0 {
		j := nextStart(b, i)
		end := len(b)
		if j >= 0 {
			end = j - 3
		}
		nal := bytes.TrimRight(b[i:end], "\x00")
		if len(nal) > 0 && !f(nal) {
			return
		}
		i = j
	}
}

// nextStart returns the index just after the first 00 00 01 at or after
// from, or -1.
func nextStart(b []byte, from int) int {
	if from >= len(b) {
		return -1
	}
	k := bytes.Index(b[from:], []byte{0, 0, 1})
	if k < 0 {
		return -1
	}
	return from + k + 3
}
