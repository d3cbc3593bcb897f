//go:build hil && cgo && linux

package v4l2dec

import (
	"os"
	"testing"

	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/h26x"
)

// The hil tests run on a Jetson (JetPack 5 or 6, libavcodec58 installed
// for the comparison): go test -tags hil ./sensors/v4l2dec, or the test
// binary with EDGED_HIL_V4L2DEC=1. They skip elsewhere.
func needBoard(t *testing.T) {
	t.Helper()
	if os.Getenv("EDGED_HIL_V4L2DEC") != "1" {
		t.Skip("set EDGED_HIL_V4L2DEC=1 on a Jetson")
	}
	if err := Load(); err != nil {
		t.Fatal(err)
	}
}

// blocks are the 16x16 block means of an NV12 picture's luma.
func blocks(b []byte, w, h, line int) []int {
	var out []int
	for by := 0; by < h; by += 16 {
		for bx := 0; bx < w; bx += 16 {
			s, n := 0, 0
			for y := by; y < min(by+16, h); y++ {
				for x := bx; x < min(bx+16, w); x++ {
					s += int(b[y*line+x])
					n++
				}
			}
			out = append(out, s/n)
		}
	}
	return out
}

// run decodes every access unit and returns each picture's luma blocks.
func run(t *testing.T, send func([]byte, uint64) error, drain func() error, receive func() ([]byte, bool), aus [][]byte) [][]int {
	var out [][]int
	for i, au := range aus {
		if err := send(au, uint64(i)); err != nil {
			t.Fatalf("access unit %d: %v", i, err)
		}
		for {
			b, ok := receive()
			if !ok {
				break
			}
			out = append(out, blocksOf(b))
		}
	}
	drain()
	for {
		b, ok := receive()
		if !ok {
			break
		}
		out = append(out, blocksOf(b))
	}
	return out
}

var blocksOf func([]byte) []int

// TestHILDecodesLikeLibavcodec: the engine decodes the sample streams
// (H.264, H.265, and a size change) into as many pictures as libavcodec,
// each within 2 of libavcodec's in every 16x16 luma block mean.
func TestHILDecodesLikeLibavcodec(t *testing.T) {
	needBoard(t)
	for _, tc := range []struct {
		files []string
		codec h26x.Codec
	}{{[]string{"h264_170x100.h264"}, h26x.H264}, {[]string{"h265_170x100.h265"}, h26x.H265}, {[]string{"h264_170x100.h264", "h264_96x64.h264"}, h26x.H264}} {
		var aus [][]byte
		for _, f := range tc.files {
			aus = append(aus, testAUs(t, f, tc.codec)...)
		}
		var got, want [][]int
		for k := range 2 {
			var send func([]byte, uint64) error
			var drain func() error
			var receive func() ([]byte, bool)
			if k == 0 {
				d, err := Open(tc.codec, Options{})
				if err != nil {
					t.Fatal(err)
				}
				send, drain = d.Send, d.Drain
				receive = func() ([]byte, bool) {
					_, f, ok, err := d.Receive()
					if err != nil || !ok {
						return nil, false
					}
					b := make([]byte, f.FrameSize())
					if corrupt, err := d.Write(b); err != nil || corrupt {
						t.Fatalf("Write: %v %v", corrupt, err)
					}
					blocksOf = func(b []byte) []int { return blocks(b, f.Width, f.Height, f.LineBytes()) }
					return b, true
				}
				got = run(t, send, drain, receive, aus)
				t.Logf("%v: %s", tc.files, d.Describe())
				d.Close()
				continue
			}
			d, err := avcodec.Open(tc.codec, avcodec.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			receive = func() ([]byte, bool) {
				_, f, ok, err := d.Receive()
				if err != nil || !ok {
					return nil, false
				}
				b := make([]byte, f.FrameSize())
				d.Write(b)
				blocksOf = func(b []byte) []int { return blocks(b, f.Width, f.Height, f.LineBytes()) }
				return b, true
			}
			want = run(t, d.Send, d.Drain, receive, aus)
			d.Close()
		}
		if len(got) != len(want) {
			t.Fatalf("%v: %d pictures, libavcodec %d", tc.files, len(got), len(want))
		}
		worst := 0
		for i := range got {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("%v: picture %d has another size", tc.files, i)
			}
			for j := range got[i] {
				worst = max(worst, abs(got[i][j]-want[i][j]))
			}
		}
		if worst > 2 {
			t.Errorf("%v: a block mean differs by %d", tc.files, worst)
		}
		t.Logf("%v: %d pictures, largest block difference %d", tc.files, len(got), worst)
	}
}

func abs(a int) int {
	if a < 0 {
		return -a
	}
	return a
}
