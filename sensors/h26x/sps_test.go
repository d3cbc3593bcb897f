package h26x

import (
	"encoding/hex"
	"errors"
	"testing"

	mch264 "github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	mch265 "github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Parameter sets of real streams: x264 and x265 through FFmpeg at 1080p
// (coded 1088 lines for H.264), 640x480 and 170x100 (both cropped).
var spsCases = []struct {
	name        string
	codec       Codec
	hex         string
	w, h        int
	cw, ch      int
	profile     string
	level       string
	fps         float64
	chroma, bit int
}{
	{"x264 1080p High", H264, "67640028acb200f0044fcb8088000003000800000301e078c19240", 1920, 1080, 1920, 1088, "High", "4.0", 30, 1, 8},
	{"x264 640x480 High", H264, "6764001eacb201407b6022000003000200000300781e2c5c90", 640, 480, 640, 480, "High", "3.0", 30, 1, 8},
	{"x264 170x100 High", H264, "6764000bacb2059fc93e0220000003002000000781e28549", 170, 100, 176, 112, "High", "1.1", 30, 1, 8},
	{"x265 1080p Main", H265, "420101016000000300900000030000030078a003c08010e5964a924caf016808000003000800000300f040", 1920, 1080, 1920, 1080, "Main", "4.0", 30, 1, 8},
	{"x265 170x100 Main", H265, "42010101600000030090000003000003001ea0162069c97964a924caf0168080000003008000000f04", 170, 100, 176, 104, "Main", "1.0", 30, 1, 8},
}

// TestParseSPS: size after cropping, coded size, profile, level, frame rate
// and sampling of real streams, and the same size as mediacommon (the
// parser gortsplib uses) finds.
func TestParseSPS(t *testing.T) {
	for _, c := range spsCases {
		t.Run(c.name, func(t *testing.T) {
			b := unhex(t, c.hex)
			s, err := ParseSPS(c.codec, b)
			if err != nil {
				t.Fatal(err)
			}
			if s.Width != c.w || s.Height != c.h || s.CodedWidth != c.cw || s.CodedHeight != c.ch {
				t.Errorf("size %dx%d coded %dx%d, want %dx%d coded %dx%d", s.Width, s.Height, s.CodedWidth, s.CodedHeight, c.w, c.h, c.cw, c.ch)
			}
			if s.ProfileName() != c.profile || s.LevelName() != c.level || s.FPS != c.fps || s.ChromaFormat != c.chroma || s.BitDepth != c.bit {
				t.Errorf("%s: profile %q level %q fps %v chroma %d bits %d", s, s.ProfileName(), s.LevelName(), s.FPS, s.ChromaFormat, s.BitDepth)
			}
			mw, mh, mfps, ok := mediacommonSPS(c.codec, b)
			if !ok || mw != s.Width || mh != s.Height || mfps != s.FPS {
				t.Errorf("mediacommon: %dx%d %vfps ok=%v", mw, mh, mfps, ok)
			}
			t.Log(s)
		})
	}
}

func mediacommonSPS(c Codec, b []byte) (w, h int, fps float64, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	if c == H264 {
		var s mch264.SPS
		if s.Unmarshal(b) != nil {
			return 0, 0, 0, false
		}
		if s.ChromaFormatIdc == 0 || s.SeparateColourPlaneFlag {
			return 0, 0, 0, false // mediacommon crops by 0 without chroma (H.264 7-19 says 1)
		}
		return s.Width(), s.Height(), s.FPS(), true
	}
	var s mch265.SPS
	if s.Unmarshal(b) != nil {
		return 0, 0, 0, false
	}
	return s.Width(), s.Height(), s.FPS(), true
}

// TestParseSPSRejects: truncations and nonsense are ErrMalformed, never a
// panic or a size.
func TestParseSPSRejects(t *testing.T) {
	for _, c := range spsCases {
		b := unhex(t, c.hex)
		// Cut before the picture size (a VUI cut short keeps the size read).
		for n := 0; n < 7; n++ {
			if _, err := ParseSPS(c.codec, b[:n]); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s cut to %d bytes: %v", c.name, n, err)
			}
		}
	}
	if _, err := ParseSPS(H264, []byte{0x68, 0xeb}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a PPS as SPS: %v", err)
	}
	// pic_width_in_mbs_minus1 = 2^20: over MaxDimension.
	huge := []byte{0x67, 0x42, 0, 0x1e, 0xf8, 0x40, 0, 0, 0x20, 0, 0, 0x80}
	if _, err := ParseSPS(H264, huge); !errors.Is(err, ErrMalformed) {
		t.Errorf("a huge width: %v", err)
	}
	if _, err := ParseSPS(Codec(9), []byte{1, 2, 3}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown codec: %v", err)
	}
}

// TestCheckParams: the parameter sets of an SDP, checked and joined as
// Annex-B (VPS, SPS, PPS order), and refused when one is missing.
func TestCheckParams(t *testing.T) {
	sps := unhex(t, spsCases[0].hex)
	pps := unhex(t, "68ebccb22c")
	p, err := CheckParams(H264, [][]byte{pps, sps})
	if err != nil || p.SPS.Width != 1920 || string(p.AnnexB) != string(annexB([][]byte{sps, pps})) {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := CheckParams(H264, [][]byte{sps}); !errors.Is(err, ErrMalformed) {
		t.Errorf("without a PPS: %v", err)
	}
	vps := unhex(t, "40010c01ffff016000000300900000030000030078928090")
	s5 := unhex(t, spsCases[3].hex)
	p5 := unhex(t, "4401c172b46240")
	p, err = CheckParams(H265, [][]byte{s5, p5, vps})
	if err != nil || p.SPS.Height != 1080 || string(p.AnnexB) != string(annexB([][]byte{vps, s5, p5})) {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := CheckParams(H265, [][]byte{s5, p5}); !errors.Is(err, ErrMalformed) {
		t.Errorf("without a VPS: %v", err)
	}
	if _, err := CheckParams(H264, [][]byte{sps, pps, {0x65, 0x88}}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a slice among the parameter sets: %v", err)
	}
	if v, err := ParseVPS(vps); err != nil || v.MaxSubLayers != 1 {
		t.Errorf("VPS %+v %v", v, err)
	}
	if p, err := ParsePPS(H265, p5); err != nil || p.ID != 0 || p.SPSID != 0 {
		t.Errorf("PPS %+v %v", p, err)
	}
}

// TestParseAllocatesNothing: the parsers run on every key access unit's
// SPS, so they must not allocate.
func TestParseAllocatesNothing(t *testing.T) {
	for _, c := range spsCases {
		b := unhex(t, c.hex)
		if n := testing.AllocsPerRun(100, func() { ParseSPS(c.codec, b) }); n != 0 {
			t.Errorf("%s: %v allocations", c.name, n)
		}
	}
}
