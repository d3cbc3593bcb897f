package h26xtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// ReadAccessUnits reads an Annex-B file and splits it into access units
// (SplitAccessUnits).
func ReadAccessUnits(path string, c h26x.Codec) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return SplitAccessUnits(b, c), nil
}

// SplitAccessUnits splits an Annex-B stream into access units: a new one
// begins at a parameter set, SEI or AUD after a slice, or at a slice that
// is the first of its picture (every NAL unit behind a 4-byte start code).
func SplitAccessUnits(b []byte, c h26x.Codec) [][]byte {
	var aus [][]byte
	var cur []byte
	sawVCL := false
	hdr := 1
	if c == h26x.H265 {
		hdr = 2
	}
	h26x.SplitAnnexB(b, func(nal []byte) bool {
		typ := c.NALType(nal)
		vcl := (c == h26x.H264 && typ >= 1 && typ <= 5) || (c == h26x.H265 && typ >= 0 && typ < 32)
		first := vcl && len(nal) > hdr && nal[hdr]&0x80 != 0
		if sawVCL && (first || !vcl) {
			aus = append(aus, cur)
			cur, sawVCL = nil, false
		}
		cur = append(append(cur, 0, 0, 0, 1), nal...)
		sawVCL = sawVCL || vcl
		return true
	})
	if len(cur) > 0 {
		aus = append(aus, cur)
	}
	return aus
}

// AccessUnits reads a sample stream as access units, failing the test if
// it cannot: file is a name in sensors/h26x/testdata as a test of a
// package beside sensors/h26x finds it (../h26x/testdata), or an absolute
// path.
func AccessUnits(t testing.TB, file string, c h26x.Codec) [][]byte {
	t.Helper()
	if !filepath.IsAbs(file) {
		file = filepath.Join("..", "h26x", "testdata", file)
	}
	aus, err := ReadAccessUnits(file, c)
	if err != nil {
		t.Fatal(err)
	}
	return aus
}

// Decoder is what the video decoders have in common (sensors/rtsp's
// Decoder, less what DecodeAll does not use).
type Decoder interface {
	Send(au []byte, id uint64) error
	Receive() (id uint64, f sensors.Format, ok bool, err error)
	Write(dst []byte) (corrupt bool, err error)
	Drain() error
}

// DecodeAll sends every access unit with ids from 100, takes every picture
// after each and after Drain, writes it into host memory (a picture
// flagged corrupt fails the test) and, unless check is nil, passes it to
// check; it returns the pictures' bytes one after another, their formats
// and their ids, in order.
func DecodeAll(t testing.TB, d Decoder, aus [][]byte, check func(b []byte, f sensors.Format, id uint64)) ([]byte, []sensors.Format, []uint64) {
	t.Helper()
	var out []byte
	var formats []sensors.Format
	var ids []uint64
	take := func() {
		for {
			id, f, ok, err := d.Receive()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			buf := make([]byte, f.FrameSize())
			if corrupt, err := d.Write(buf); err != nil || corrupt {
				t.Fatalf("Write: corrupt %v, %v", corrupt, err)
			}
			if check != nil {
				check(buf, f, id)
			}
			out, formats, ids = append(out, buf...), append(formats, f), append(ids, id)
		}
	}
	for i, au := range aus {
		if err := d.Send(au, uint64(100+i)); err != nil {
			t.Fatalf("access unit %d: %v", i, err)
		}
		take()
	}
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	take()
	return out, formats, ids
}

// CheckNV12 compares picture id, an NV12 picture b of format f, with
// want(plane, x, y) (plane 0 luma, 1 the interleaved chroma), byte by byte
// of its visible rows, and stops the test at the first that differs.
func CheckNV12(t testing.TB, b []byte, f sensors.Format, id uint64, want func(plane, x, y int) byte) {
	t.Helper()
	line := f.LineBytes()
	for y := range f.Height {
		for x := range f.Width {
			if got, w := b[y*line+x], want(0, x, y); got != w {
				t.Fatalf("picture %d luma (%d,%d) = %#x, want %#x", id, x, y, got, w)
			}
		}
	}
	c := b[line*f.Height:]
	for y := range (f.Height + 1) / 2 {
		for x := range 2 * ((f.Width + 1) / 2) {
			if got, w := c[y*line+x], want(1, x, y); got != w {
				t.Fatalf("picture %d chroma (%d,%d) = %#x, want %#x", id, x, y, got, w)
			}
		}
	}
}
