package avcodec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
)

// need loads libavcodec or skips; EDGED_REQUIRE_LIBAVCODEC=1 (CI) makes
// its absence a failure.
func need(t testing.TB) {
	t.Helper()
	if _, _, err := Load(""); err != nil {
		if os.Getenv("EDGED_REQUIRE_LIBAVCODEC") == "1" {
			t.Fatalf("%v, and EDGED_REQUIRE_LIBAVCODEC=1", err)
		}
		t.Skipf("%v (apt-get install libavcodec59); EDGED_REQUIRE_LIBAVCODEC=1 makes this a failure", err)
	}
}

// accessUnits reads a sample stream of sensors/h26x as the depacketizer
// would deliver it: Annex-B access units.
func accessUnits(t testing.TB, file string, c h26x.Codec) [][]byte {
	return h26xtest.AccessUnits(t, file, c)
}

// decodeAll sends every access unit, drains, and returns the NV12 bytes of
// every picture in order with their formats.
func decodeAll(t testing.TB, d *Decoder, aus [][]byte) ([]byte, []sensors.Format, []uint64) {
	t.Helper()
	return h26xtest.DecodeAll(t, d, aus, nil)
}

var want = map[string]string{
	"h264_170x100.h264": "73d43a014c92056e37c992ca3ad2896f84bdd398dd46a8bcdde87cfec50c4680",
	"h265_170x100.h265": "2da8fe8c10bcb1cd4b4efdc70dad813c044755879aa6f5de917a67be192624a7",
	"h264_96x64.h264":   "cd97fc148f569b152bad9e678da0e868fa315ec10c835ef4cd4f5f31572c55fe",
}

// TestDecodesWhatFFmpegDecodes: both codecs, one thread and libavcodec's
// frame threads: every picture, in order, with its id, and NV12 bytes equal
// to what the ffmpeg program writes for the same file (the checksums in
// sensors/h26x/testdata/README.md).
func TestDecodesWhatFFmpegDecodes(t *testing.T) {
	need(t)
	for _, tc := range []struct {
		file  string
		codec h26x.Codec
	}{{"h264_170x100.h264", h26x.H264}, {"h265_170x100.h265", h26x.H265}, {"h264_96x64.h264", h26x.H264}} {
		for _, threads := range []int{1, 3} {
			d, err := Open(tc.codec, Options{Threads: threads})
			if err != nil {
				t.Fatal(err)
			}
			aus := accessUnits(t, tc.file, tc.codec)
			out, formats, ids := decodeAll(t, d, aus)
			d.Close()
			sum := sha256.Sum256(out)
			if got := hex.EncodeToString(sum[:]); got != want[tc.file] {
				t.Errorf("%s, %d threads: %d pictures, sha256 %s; want FFmpeg's %s", tc.file, threads, len(formats), got, want[tc.file])
			}
			for i, id := range ids {
				if id != uint64(100+i) {
					t.Fatalf("%s: picture %d has id %d", tc.file, i, id)
				}
			}
			if len(formats) != len(aus) || formats[0].Pixel != sensors.NV12 {
				t.Errorf("%s: %d pictures of %d access units, %v", tc.file, len(formats), len(aus), formats[0])
			}
			t.Logf("%s: %d pictures %v, %s", tc.file, len(formats), formats[0], d.Describe())
		}
	}
}

// TestSizeChangeMidStream: a stream that switches from 170x100 to 96x64
// at a key picture (a new SPS) is followed without reopening: the format
// changes with the first picture of the new size, the bytes stay exact.
func TestSizeChangeMidStream(t *testing.T) {
	need(t)
	d, err := Open(h26x.H264, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, b := accessUnits(t, "h264_170x100.h264", h26x.H264), accessUnits(t, "h264_96x64.h264", h26x.H264)
	out, formats, _ := decodeAll(t, d, append(a, b...))
	if len(formats) != len(a)+len(b) || formats[len(a)-1].Width != 170 || formats[len(a)].Width != 96 || formats[len(a)].Height != 64 {
		t.Fatalf("%d pictures; around the change: %v, %v", len(formats), formats[len(a)-1], formats[len(a)])
	}
	split := len(a) * formats[0].FrameSize()
	s1, s2 := sha256.Sum256(out[:split]), sha256.Sum256(out[split:])
	if hex.EncodeToString(s1[:]) != want["h264_170x100.h264"] || hex.EncodeToString(s2[:]) != want["h264_96x64.h264"] {
		t.Error("pictures differ from FFmpeg's")
	}
}

// TestParamsAsExtradata: a stream whose parameter sets come out of band
// (an SDP's sprop-parameter-sets) decodes when they are given to Open,
// and does not without them.
func TestParamsAsExtradata(t *testing.T) {
	need(t)
	for _, tc := range []struct {
		file  string
		codec h26x.Codec
	}{{"h264_170x100.h264", h26x.H264}, {"h265_170x100.h265", h26x.H265}} {
		aus := accessUnits(t, tc.file, tc.codec)
		var params [][]byte
		var stripped [][]byte
		for _, au := range aus {
			var keep []byte
			h26x.SplitAnnexB(au, func(nal []byte) bool {
				typ := tc.codec.NALType(nal)
				if (tc.codec == h26x.H264 && (typ == 7 || typ == 8)) || (tc.codec == h26x.H265 && typ >= 32 && typ <= 34) {
					if len(params) < 3 {
						params = append(params, nal)
					}
					return true
				}
				keep = append(append(keep, 0, 0, 0, 1), nal...)
				return true
			})
			stripped = append(stripped, keep)
		}
		p, err := h26x.CheckParams(tc.codec, params)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Open(tc.codec, Options{Threads: 1, Params: p.AnnexB})
		if err != nil {
			t.Fatal(err)
		}
		out, formats, _ := decodeAll(t, d, stripped)
		d.Close()
		sum := sha256.Sum256(out)
		if len(formats) != len(aus) || hex.EncodeToString(sum[:]) != want[tc.file] {
			t.Errorf("%s with extradata: %d pictures, not FFmpeg's bytes", tc.file, len(formats))
		}
		d, err = Open(tc.codec, Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, au := range stripped {
			if err := d.Send(au, uint64(i)); err != nil {
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("error %v is not ErrDecode", err)
				}
				continue
			}
			for {
				_, _, ok, _ := d.Receive()
				if !ok {
					break
				}
				n++
			}
		}
		d.Close()
		if n != 0 {
			t.Errorf("%s without parameter sets: %d pictures", tc.file, n)
		}
	}
}

// TestOptionsAndMisuse: bad options are refused before loading anything;
// Write without a picture and calls after Close are errors, not crashes;
// Close is idempotent.
func TestOptionsAndMisuse(t *testing.T) {
	if _, err := Open(h26x.H264, Options{Threads: -1}); err == nil {
		t.Error("threads -1 accepted")
	}
	if _, err := Open(h26x.H264, Options{ThreadType: "auto"}); err == nil {
		t.Error("thread type auto accepted")
	}
	need(t)
	if _, err := Open(h26x.H264, Options{Library: "libavcodec.so.1"}); !errors.Is(err, ErrNoLibrary) {
		t.Errorf("another library once one is loaded: %v", err)
	}
	d, err := Open(h26x.H265, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write(make([]byte, 100)); err == nil {
		t.Error("Write without a picture")
	}
	d.Close()
	d.Close()
	if err := d.Send([]byte{0, 0, 0, 1, 0x40}, 0); err == nil {
		t.Error("Send after Close")
	}
	if _, _, _, err := d.Receive(); err == nil {
		t.Error("Receive after Close")
	}
}

// TestGarbageIsAnError: random bytes and truncated access units are
// errors wrapping ErrDecode (or nothing), never a crash, and the decoder
// decodes a good stream afterwards.
func TestGarbageIsAnError(t *testing.T) {
	need(t)
	d, err := Open(h26x.H264, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	aus := accessUnits(t, "h264_170x100.h264", h26x.H264)
	junk := [][]byte{{0, 0, 0, 1, 0x65, 0xff, 0xff}, {0, 0, 0, 1, 0x67}, aus[0][:len(aus[0])/2], aus[3][:20]}
	for i, j := range junk {
		if err := d.Send(j, uint64(i)); err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("junk %d: %v", i, err)
		}
		for {
			_, _, ok, err := d.Receive()
			if err != nil || !ok {
				break
			}
		}
	}
	good := 0
	for i, au := range aus {
		if d.Send(au, uint64(i)) != nil {
			continue
		}
		for {
			_, f, ok, _ := d.Receive()
			if !ok {
				break
			}
			buf := make([]byte, f.FrameSize())
			if _, err := d.Write(buf); err == nil {
				good++
			}
		}
	}
	if good < len(aus)-2 {
		t.Errorf("only %d of %d pictures after the junk", good, len(aus))
	}
}

// TestSteadyStateAllocatesNothing: Send, Receive and Write of a running
// stream allocate nothing on the Go heap (libavcodec's own buffers are
// its business).
func TestSteadyStateAllocatesNothing(t *testing.T) {
	need(t)
	d, err := Open(h26x.H264, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	aus := accessUnits(t, "h264_170x100.h264", h26x.H264)
	buf := make([]byte, 170*100*3/2)
	i := 0
	step := func() {
		d.Send(aus[i%len(aus)], uint64(i))
		i++
		for {
			_, _, ok, _ := d.Receive()
			if !ok {
				return
			}
			d.Write(buf)
		}
	}
	for range len(aus) {
		step()
	}
	if n := testing.AllocsPerRun(len(aus)*2, step); n != 0 {
		t.Errorf("%v allocations per access unit", n)
	}
}
