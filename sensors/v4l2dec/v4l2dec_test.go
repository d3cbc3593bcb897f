package v4l2dec

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
)

func testAUs(t testing.TB, file string, c h26x.Codec) [][]byte {
	return h26xtest.AccessUnits(t, file, c)
}

// decodeAll sends every access unit with ids from 100, writes every
// picture to host memory and compares it with the fake's pattern for its
// id.
func decodeAll(t *testing.T, d *Decoder, aus [][]byte) ([]sensors.Format, []uint64) {
	t.Helper()
	_, formats, ids := h26xtest.DecodeAll(t, d, aus, func(b []byte, f sensors.Format, id uint64) { checkPicture(t, b, f, id) })
	return formats, ids
}

// checkPicture compares an NV12 picture with the fake's pattern for ts.
func checkPicture(t *testing.T, b []byte, f sensors.Format, ts uint64) {
	t.Helper()
	h26xtest.CheckNV12(t, b, f, uint64(ts), func(plane, x, y int) byte { return pattern(ts, plane, x, y) })
}

// TestDecodesThroughTheM2MSequence: both codecs against the fake engine:
// the bitstream format, whole-frame input and error reporting set, the
// resolution event subscribed, the capture plane set up once from the
// first SPS (format, crop, minimum buffers, each buffer's dmabuf wrapped),
// every picture back with its id and its bytes, converted into the one
// pitch-linear surface mapped for CUDA once; Close frees everything.
func TestDecodesThroughTheM2MSequence(t *testing.T) {
	for _, tc := range []struct {
		file  string
		codec h26x.Codec
	}{{"h264_170x100.h264", h26x.H264}, {"h265_170x100.h265", h26x.H265}} {
		d, f, g, err := openFake(tc.codec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		aus := testAUs(t, tc.file, tc.codec)
		formats, ids := decodeAll(t, d, aus)
		if len(ids) != len(aus) {
			t.Fatalf("%s: %d pictures of %d", tc.file, len(ids), len(aus))
		}
		for i, id := range ids {
			if id != uint64(100+i) {
				t.Fatalf("%s: picture %d has id %d", tc.file, i, id)
			}
		}
		if fm := formats[0]; fm.Width != 170 || fm.Height != 100 || fm.Pixel != sensors.NV12 {
			t.Errorf("%s: %v", tc.file, fm)
		}
		if f.ctrls[cidDisableCompleteFrameInput] != 0 || f.ctrls[cidErrorReporting] != 1 || !f.subscribed {
			t.Errorf("%s: controls %v, subscribed %v", tc.file, f.ctrls, f.subscribed)
		}
		if f.counts["capture setups"] != 1 || f.counts["surfaces"] != 1 || f.counts["mapped"] != 1 || d.capture == nil {
			t.Errorf("%s: %v", tc.file, f.counts)
		}
		if !strings.Contains(d.Describe(), "/dev/v4l2-nvdec") {
			t.Errorf("Describe: %s", d.Describe())
		}
		d.Close()
		d.Close()
		if f.opened || len(f.surfaces) != 0 || g.closes != 1 || f.outStream || f.capStream {
			t.Errorf("%s: after Close: open %v, %d surfaces, GPU closed %d times, streaming %v %v", tc.file, f.opened, len(f.surfaces), g.closes, f.outStream, f.capStream)
		}
	}
}

// TestResolutionChangeSetsCaptureUpAgain: a stream that changes size at a
// key picture raises a second resolution event; the capture plane is
// stopped, its buffers requested again and the pitch-linear surface made
// for the new size; pictures follow each size.
func TestResolutionChangeSetsCaptureUpAgain(t *testing.T) {
	d, f, _, _ := openFake(h26x.H264, Options{})
	defer d.Close()
	a, b := testAUs(t, "h264_170x100.h264", h26x.H264), testAUs(t, "h264_96x64.h264", h26x.H264)
	formats, _ := decodeAll(t, d, append(append([][]byte{}, a...), b...))
	if len(formats) != len(a)+len(b) || formats[len(a)].Width != 96 || formats[len(a)].Height != 64 {
		t.Fatalf("%d pictures; after the change %v", len(formats), formats[min(len(a), len(formats)-1)])
	}
	if f.counts["capture setups"] != 2 || f.counts["surfaces"] != 2 || f.counts["released"] != 1 {
		t.Errorf("%v", f.counts)
	}
}

// TestFlaggedAndFailedPictures: a picture the engine flags is written and
// marked corrupt; a bitstream buffer it flags is an ErrDecode from the
// Send that reclaims it (that access unit is not queued); a failed conversion is a Write error that gives
// the buffer back (the next pictures decode); pictures Receive reported
// and nobody wrote go back to the engine too.
func TestFlaggedAndFailedPictures(t *testing.T) {
	aus := testAUs(t, "h264_170x100.h264", h26x.H264)
	d, f, _, _ := openFake(h26x.H264, Options{})
	defer d.Close()
	f.errorTS[2] = true
	f.brokenTS[1] = true
	var corrupt []uint64
	var sendErr error
	for i, au := range aus[:12] {
		if i == 6 {
			f.failConvert = true
		}
		if i == 7 {
			f.failConvert = false
		}
		if err := d.Send(au, uint64(i)); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("access unit %d: %v", i, err)
			}
			sendErr = err
			continue // not queued: the source drops until the next key
		}
		id, fm, ok, err := d.Receive()
		if err != nil || !ok {
			t.Fatalf("access unit %d: no picture (%v)", i, err)
		}
		if i == 9 {
			continue // received, not written
		}
		c, err := d.Write(make([]byte, fm.FrameSize()))
		if i == 6 {
			if !errors.Is(err, ErrDecode) {
				t.Errorf("Write with the conversion failing: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("picture %d: %v", id, err)
		}
		if c {
			corrupt = append(corrupt, id)
		}
	}
	if len(corrupt) != 1 || corrupt[0] != 2 || sendErr == nil {
		t.Errorf("corrupt %v, want [2]; send error %v", corrupt, sendErr)
	}
	if _, err := d.Write(make([]byte, 1<<20)); !errors.Is(err, ErrDecode) {
		t.Errorf("Write without a picture: %v", err)
	}
}

// TestWriteDevice: a picture copied into memory the GPU addresses is the
// one Write gives; a managed slot is given to the decoder's stream for the
// copy and back to the host after it (a Jetson's rule); a destination too
// small is refused.
func TestWriteDevice(t *testing.T) {
	d, _, g, _ := openFake(h26x.H264, Options{})
	defer d.Close()
	if err := d.Send(testAUs(t, "h264_170x100.h264", h26x.H264)[0], 7); err != nil {
		t.Fatal(err)
	}
	id, f, ok, err := d.Receive()
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := d.WriteDevice(fakeDeviceBase, f.FrameSize()-1); !errors.Is(err, sensors.ErrFormat) {
		t.Errorf("one byte short: %v", err)
	}
	if _, err := d.WriteDevice(fakeDeviceBase, f.FrameSize()); err != nil {
		t.Fatal(err)
	}
	checkPicture(t, g.device, f, id)
	if g.owned || g.attaches != 2 {
		t.Errorf("managed slot: %d attaches, owned by the stream after the copy %v; want 2 and false", g.attaches, g.owned)
	}
}

// TestOpenFailures: no decoder node, a busy one, a codec the engine is
// not asked for, a CUDA mapping that fails at the first picture; each an
// error of the right kind naming the cause, and nothing left open.
func TestOpenFailures(t *testing.T) {
	f := newFake(h26x.H264)
	f.nodes = map[string]bool{}
	g := &fakeGPU{f: f}
	if _, err := newDecoder(f, f, g, h26x.H264, Options{}); !errors.Is(err, ErrNoDecoder) || !strings.Contains(err.Error(), "/dev/v4l2-nvdec") || g.closes != 1 {
		t.Errorf("no node: %v, GPU closed %d times", err, g.closes)
	}
	f = newFake(h26x.H264)
	f.failOpen = syscall.EBUSY
	if _, err := newDecoder(f, f, &fakeGPU{f: f}, h26x.H264, Options{}); !errors.Is(err, ErrNoDecoder) || !errors.Is(err, syscall.EBUSY) {
		t.Errorf("busy: %v", err)
	}
	f = newFake(h26x.H265) // the engine expects H.265: S_FMT for H.264 is refused
	if _, err := newDecoder(f, f, &fakeGPU{f: f}, h26x.H264, Options{}); !errors.Is(err, ErrDecode) || f.opened {
		t.Errorf("refused format: %v, left open %v", err, f.opened)
	}
	if _, err := newDecoder(f, f, &fakeGPU{f: f}, h26x.Codec(9), Options{}); !errors.Is(err, sensors.ErrFormat) {
		t.Errorf("codec 9: %v", err)
	}
	d, f2, _, _ := openFake(h26x.H264, Options{})
	f2.failCUDA = true
	if err := d.Send(testAUs(t, "h264_170x100.h264", h26x.H264)[0], 0); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "CUDA") {
		t.Errorf("CUDA mapping failed: %v", err)
	}
	d.Close()
	if f2.opened {
		t.Error("left open")
	}
}
