package h26x

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseSPS: any bytes as an SPS of either codec: no panic, an error
// that wraps ErrMalformed or a size within MaxDimension, and, where
// mediacommon (gortsplib's parser) also reads it, the same size.
func FuzzParseSPS(f *testing.F) {
	for _, c := range spsCases {
		f.Add(c.codec == H265, unhex(f, c.hex))
	}
	f.Fuzz(func(t *testing.T, h265 bool, b []byte) {
		c := H264
		if h265 {
			c = H265
		}
		s, err := ParseSPS(c, b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if s.Width <= 0 || s.Height <= 0 || s.Width > s.CodedWidth || s.Height > s.CodedHeight || s.CodedWidth > MaxDimension || s.CodedHeight > MaxDimension {
			t.Fatalf("size %dx%d coded %dx%d", s.Width, s.Height, s.CodedWidth, s.CodedHeight)
		}
		if mw, mh, _, ok := mediacommonSPS(c, b); ok && mw > 0 && mh > 0 && (mw != s.Width || mh != s.Height) {
			t.Fatalf("%s: %dx%d, mediacommon %dx%d", c, s.Width, s.Height, mw, mh)
		}
	})
}

// FuzzCheckParams: parameter sets as an SDP would give them (split at
// 0xff bytes here), of either codec: no panic; accepted ones are Annex-B
// of the input's NAL units and carry a parsed SPS.
func FuzzCheckParams(f *testing.F) {
	f.Add(false, bytes.Join([][]byte{unhex(f, spsCases[0].hex), unhex(f, "68ebccb22c")}, []byte{0xff}))
	f.Add(true, bytes.Join([][]byte{unhex(f, "40010c01ffff016000000300900000030000030078928090"), unhex(f, spsCases[3].hex), unhex(f, "4401c172b46240")}, []byte{0xfe}))
	f.Fuzz(func(t *testing.T, h265 bool, b []byte) {
		c := H264
		if h265 {
			c = H265
		}
		nals := bytes.Split(b, []byte{0xff})
		p, err := CheckParams(c, nals)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if p.SPS.Width <= 0 || len(p.AnnexB) < len(b) {
			t.Fatalf("%+v", p)
		}
		n := 0
		SplitAnnexB(p.AnnexB, func([]byte) bool { n++; return true })
		if n > len(nals) {
			t.Fatalf("%d NAL units out of %d in", n, len(nals))
		}
	})
}

// FuzzDepacketize: RTP payloads of either codec, cut from the input (each
// chunk: a flags byte — marker, a skipped sequence number, a new
// timestamp — a length byte and the payload): no panic, every delivered
// access unit is Annex-B within MaxAccessUnit with its padding zeroed,
// the first is a key, and every buffer comes back.
func FuzzDepacketize(f *testing.F) {
	for _, c := range []Codec{H264, H265} {
		aus := readAUs(f, c)
		var in []byte
		for i, p := range packetize(f, c, aus[:3], 120) {
			flags := byte(0)
			if p.Marker {
				flags |= 1
			}
			if i > 0 && p.Timestamp != 0 {
				flags |= 4
			}
			in = append(append(in, flags, byte(len(p.Payload))), p.Payload...)
		}
		f.Add(c == H265, in)
	}
	f.Fuzz(func(t *testing.T, h265 bool, in []byte) {
		c := H264
		if h265 {
			c = H265
		}
		delivered := 0
		var d *Depacketizer
		d = NewDepacketizer(c, 3, func(au *AccessUnit) {
			if delivered == 0 && !au.Key {
				t.Fatal("the first access unit delivered is not a key")
			}
			delivered++
			if len(au.Data) < 5 || !bytes.HasPrefix(au.Data, startCode[:]) || len(au.Data) > MaxAccessUnit {
				t.Fatalf("access unit of %d bytes: % x", len(au.Data), au.Data[:min(len(au.Data), 8)])
			}
			pad := au.buf[len(au.Data) : len(au.Data)+Padding]
			if !bytes.Equal(pad, make([]byte, Padding)) {
				t.Fatal("padding not zero")
			}
			if au.SPS != nil {
				ParseSPS(c, au.SPS)
			}
			d.Recycle(au)
		}, func(DropReason) {})
		seq, ts := uint16(0), uint32(0)
		for len(in) >= 2 {
			flags, n := in[0], int(in[1])
			in = in[2:]
			n = min(n, len(in))
			if flags&2 != 0 {
				seq++
			}
			if flags&4 != 0 {
				ts += 3000
			}
			d.Push(in[:n], seq, ts, flags&1 != 0, 0)
			seq++
			in = in[n:]
		}
		d.Reset(c)
		if d.Free() != 3 {
			t.Fatalf("%d of 3 buffers free after Reset", d.Free())
		}
	})
}
