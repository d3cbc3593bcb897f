package nvdec

import (
	"errors"
	"strings"
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
	_, formats, ids := h26xtest.DecodeAll(t, d, aus, func(b []byte, f sensors.Format, id uint64) { checkPicture(t, b, f, int64(id)) })
	return formats, ids
}

// checkPicture compares an NV12 picture with the fake's pattern for ts.
func checkPicture(t *testing.T, b []byte, f sensors.Format, ts int64) {
	t.Helper()
	h26xtest.CheckNV12(t, b, f, uint64(ts), func(plane, x, y int) byte { return pattern(ts, plane, x, y) })
}

// TestDecodesThroughTheParserCallbacks: both codecs through the fake
// libnvcuvid. The first SPS makes one decoder from the sequence callback
// with the stream's codec, coded size, display area, an even target size
// and its minimum surfaces plus headroom; every picture comes back with
// its id, mapped on the decoder's stream, its luma and chroma rows copied
// out of a pitched surface (chroma after the even luma height), nothing
// left mapped.
func TestDecodesThroughTheParserCallbacks(t *testing.T) {
	for _, tc := range []struct {
		file  string
		codec h26x.Codec
		code  uint32
	}{{"h264_170x100.h264", h26x.H264, codecH264}, {"h265_170x100.h265", h26x.H265, codecHEVC}} {
		d, lib, g, err := openFake(tc.codec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		aus := testAUs(t, tc.file, tc.codec)
		formats, ids := decodeAll(t, d, aus)
		if len(ids) != len(aus) {
			t.Fatalf("%s: %d pictures of %d access units", tc.file, len(ids), len(aus))
		}
		for i, id := range ids {
			if id != uint64(100+i) {
				t.Fatalf("%s: picture %d has id %d", tc.file, i, id)
			}
		}
		if f := formats[0]; f.Width != 170 || f.Height != 100 || f.Pixel != sensors.NV12 || f.LineBytes() != 170 {
			t.Errorf("%s: format %v", tc.file, f)
		}
		if lib.created != 1 || lib.reconfigured != 0 || len(lib.infos) != 1 {
			t.Fatalf("%s: %d decoders made, %d reconfigured", tc.file, lib.created, lib.reconfigured)
		}
		info := lib.infos[0][:]
		if u64(info, crW) != 176 || u64(info, crH) != 112 || u64(info, crTargetW) != 170 || u64(info, crTargetH) != 100 ||
			le32(info, crCodec) != tc.code || le32(info, crChroma) != chroma420 || u64(info, crFlags) != createCUVID ||
			u64(info, crSurfaces) != int(lib.minSurfaces)+extraSurfaces || u64(info, crMaxW) != 176 {
			t.Errorf("%s: create info coded %dx%d target %dx%d codec %d surfaces %d", tc.file, u64(info, crW), u64(info, crH),
				u64(info, crTargetW), u64(info, crTargetH), le32(info, crCodec), u64(info, crSurfaces))
		}
		for _, s := range lib.streamSeen {
			if s != lib.wantStream {
				t.Fatalf("%s: mapped on stream %#x, want the decoder's %#x", tc.file, s, lib.wantStream)
			}
		}
		if lib.maxMapped != 1 || lib.mapped != 0 || g.syncs != len(ids) {
			t.Errorf("%s: at most %d mapped, %d left mapped, %d syncs for %d pictures", tc.file, lib.maxMapped, lib.mapped, g.syncs, len(ids))
		}
		d.Close()
		d.Close()
		if lib.destroyed != 1 || lib.destroyedPs != 1 || g.closes != 1 {
			t.Errorf("%s: Close destroyed %d decoders, %d parsers, closed the GPU %d times", tc.file, lib.destroyed, lib.destroyedPs, g.closes)
		}
	}
}

// TestIDsFollowTheSurfaceNotTheTimestamp: each picture comes back with
// the id of the access unit decoded into its surface, whatever timestamp
// the display callback carries (NVDEC's parser hands timestamps out in
// increasing order, which a stream with B-frames showed on the H200: the
// ids were not the access units').
func TestIDsFollowTheSurfaceNotTheTimestamp(t *testing.T) {
	d, lib, _, _ := openFake(h26x.H264, Options{})
	defer d.Close()
	lib.sortTimestamps = true
	aus := testAUs(t, "h264_170x100.h264", h26x.H264)
	_, ids := decodeAll(t, d, aus) // decodeAll checks each picture's bytes against its id's pattern
	for i, id := range ids {
		if id != uint64(100+i) {
			t.Fatalf("picture %d has id %d, want %d", i, id, 100+i)
		}
	}
}

// TestSizeChangeReconfiguresOrRecreates: a stream that switches from
// 170x100 to 96x64 and back at key pictures reconfigures the decoder in
// place both times (each coded size fits the one it was made for); one
// that starts at 96x64 and grows to 170x100 makes it again (larger than it
// was made for); pictures follow each size with the right bytes.
func TestSizeChangeReconfiguresOrRecreates(t *testing.T) {
	d, lib, _, err := openFake(h26x.H264, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, b := testAUs(t, "h264_170x100.h264", h26x.H264), testAUs(t, "h264_96x64.h264", h26x.H264)
	formats, _ := decodeAll(t, d, append(append(append([][]byte{}, a...), b...), a...))
	if len(formats) != 2*len(a)+len(b) {
		t.Fatalf("%d pictures of %d", len(formats), 2*len(a)+len(b))
	}
	if f := formats[len(a)]; f.Width != 96 || f.Height != 64 {
		t.Errorf("first picture after the change: %v", f)
	}
	if f := formats[len(a)+len(b)]; f.Width != 170 || f.Height != 100 {
		t.Errorf("first picture after the change back: %v", f)
	}
	if lib.created != 1 || lib.reconfigured != 2 || lib.destroyed != 0 {
		t.Errorf("made %d, reconfigured %d, destroyed %d; want 1, 2, 0", lib.created, lib.reconfigured, lib.destroyed)
	}
	if st := d.Stats(); st.Creates != 1 || st.Reconfigures != 2 {
		t.Errorf("Stats %+v", st)
	}
	grow, glib, _, _ := openFake(h26x.H264, Options{})
	defer grow.Close()
	if formats, _ := decodeAll(t, grow, append(append([][]byte{}, b...), a...)); len(formats) != len(a)+len(b) || formats[len(b)].Width != 170 {
		t.Errorf("growing: %d pictures", len(formats))
	}
	if glib.created != 2 || glib.reconfigured != 0 || glib.destroyed != 1 {
		t.Errorf("growing: made %d, reconfigured %d, destroyed %d; want 2, 0, 1", glib.created, glib.reconfigured, glib.destroyed)
	}
	rc := lib.reconfs[0][:]
	if le32(rc, rcW) != 96 || le32(rc, rcH) != 64 || le32(rc, rcTargetW) != 96 || le32(rc, rcTargetH) != 64 {
		t.Errorf("reconfigured to coded %dx%d target %dx%d", le32(rc, rcW), le32(rc, rcH), le32(rc, rcTargetW), le32(rc, rcTargetH))
	}
	// A decoder that refuses to reconfigure is made again.
	d2, lib2, _, _ := openFake(h26x.H264, Options{})
	defer d2.Close()
	lib2.failReconfigure = true
	if formats, _ := decodeAll(t, d2, append(append([][]byte{}, a...), b...)); len(formats) != len(a)+len(b) {
		t.Errorf("with reconfigure refused: %d pictures", len(formats))
	}
	if lib2.created != 2 || lib2.reconfigured != 0 {
		t.Errorf("with reconfigure refused: made %d, reconfigured %d", lib2.created, lib2.reconfigured)
	}
}

// TestParamsGoBeforeTheFirstAccessUnit: a stream whose parameter sets come
// out of band (an SDP's) decodes when they are given to Open; without them
// the parser decodes nothing (no sequence header) and reports no error.
func TestParamsGoBeforeTheFirstAccessUnit(t *testing.T) {
	aus := testAUs(t, "h264_170x100.h264", h26x.H264)
	var params [][]byte
	var stripped [][]byte
	for _, au := range aus {
		var keep []byte
		h26x.SplitAnnexB(au, func(nal []byte) bool {
			if typ := h26x.H264.NALType(nal); typ == 7 || typ == 8 {
				if len(params) < 2 {
					params = append(params, nal)
				}
				return true
			}
			keep = append(append(keep, 0, 0, 0, 1), nal...)
			return true
		})
		stripped = append(stripped, keep)
	}
	p, err := h26x.CheckParams(h26x.H264, params)
	if err != nil {
		t.Fatal(err)
	}
	d, _, _, _ := openFake(h26x.H264, Options{Params: p.AnnexB})
	if formats, _ := decodeAll(t, d, stripped); len(formats) != len(aus) {
		t.Errorf("with the parameter sets: %d pictures of %d", len(formats), len(aus))
	}
	d.Close()
	d, _, _, _ = openFake(h26x.H264, Options{})
	if formats, _ := decodeAll(t, d, stripped); len(formats) != 0 {
		t.Errorf("without parameter sets: %d pictures", len(formats))
	}
	d.Close()
}

// TestFailuresAreErrorsAndTheStreamRecovers: each failure at the library
// boundary is an error of the right kind, never a crash or a stuck
// mapping: a picture the decoder refuses is ErrDecode from Send (the
// source then drops until the next key) and the next key picture decodes
// again; a picture NVDEC flags (error, concealment) is written and marked
// corrupt; a failed map or copy is a Write error that leaves nothing
// mapped; what the GPU does not decode (caps, size, 4:4:4) is
// sensors.ErrFormat; a parser that cannot be made is ErrNoNVDEC.
func TestFailuresAreErrorsAndTheStreamRecovers(t *testing.T) {
	aus := testAUs(t, "h264_170x100.h264", h26x.H264)
	d, lib, g, _ := openFake(h26x.H264, Options{})
	defer d.Close()
	lib.failDecodeTS = 3
	lib.statusTS[1] = statusConcealed
	lib.statusTS[2] = statusError
	var corrupt []uint64
	var sendErr error
	for i, au := range aus[:5] {
		if err := d.Send(au, uint64(i)); err != nil {
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "cuvidDecodePicture") {
				t.Fatalf("access unit %d: %v", i, err)
			}
			sendErr = err
			continue
		}
		for {
			id, f, ok, err := d.Receive()
			if err != nil || !ok {
				break
			}
			c, err := d.Write(make([]byte, f.FrameSize()))
			if err != nil {
				t.Fatal(err)
			}
			if c {
				corrupt = append(corrupt, id)
			}
		}
	}
	if sendErr == nil || len(corrupt) != 2 || corrupt[0] != 1 || corrupt[1] != 2 {
		t.Errorf("send error %v; corrupt pictures %v, want [1 2]", sendErr, corrupt)
	}
	// The rest of the stream (its next key onwards) decodes.
	lib.failDecodeTS = -1
	formats, _ := decodeAll(t, d, aus)
	if len(formats) != len(aus) {
		t.Errorf("after the failure: %d pictures of %d", len(formats), len(aus))
	}

	lib.failMap = true
	d.Send(aus[0], 7)
	if _, f, ok, _ := d.Receive(); ok {
		if _, err := d.Write(make([]byte, f.FrameSize())); !errors.Is(err, ErrDecode) {
			t.Errorf("Write with the map failing: %v", err)
		}
	}
	lib.failMap = false
	g.failCopy = true
	d.Send(aus[1], 8)
	if _, f, ok, _ := d.Receive(); ok {
		if _, err := d.Write(make([]byte, f.FrameSize())); !errors.Is(err, ErrDecode) || lib.mapped != 0 {
			t.Errorf("Write with the copy failing: %v, %d left mapped", err, lib.mapped)
		}
	}
	g.failCopy = false
	if _, err := d.Write(make([]byte, 1<<20)); !errors.Is(err, ErrDecode) {
		t.Errorf("Write without a picture: %v", err)
	}
	d.Send(aus[2], 9)
	if _, _, ok, _ := d.Receive(); !ok {
		t.Fatal("no picture")
	}
	if _, err := d.Write(make([]byte, 100)); !errors.Is(err, sensors.ErrFormat) {
		t.Errorf("Write into 100 bytes: %v", err)
	}

	formatErr := func(name string, tweak func(*fakeLib), file string) {
		t.Helper()
		d, lib, _, _ := openFake(h26x.H264, Options{})
		defer d.Close()
		tweak(lib)
		err := d.Send(testAUs(t, file, h26x.H264)[0], 0)
		if !errors.Is(err, sensors.ErrFormat) {
			t.Errorf("%s: %v, want sensors.ErrFormat", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	formatErr("unsupported", func(l *fakeLib) { l.supported = false }, "h264_170x100.h264")
	formatErr("too wide", func(l *fakeLib) { l.maxW = 160 }, "h264_170x100.h264")
	formatErr("too many macroblocks", func(l *fakeLib) { l.maxMB = 40 }, "h264_170x100.h264")
	formatErr("too small", func(l *fakeLib) { l.minW = 256 }, "h264_170x100.h264")
	formatErr("4:4:4", func(*fakeLib) {}, "h264_444_64x48.h264")

	d2, lib2, _, _ := openFake(h26x.H264, Options{})
	lib2.failCreate = true
	if err := d2.Send(aus[0], 0); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "cuvidCreateDecoder") {
		t.Errorf("decoder not made: %v", err)
	}
	d2.Close()
	lib3 := newFakeLib(h26x.H264)
	lib3.failParser = true
	g3 := &fakeGPU{lib: lib3}
	if _, err := newDecoder(lib3, g3, h26x.H264, Options{}, ""); !errors.Is(err, ErrNoNVDEC) || g3.closes != 1 {
		t.Errorf("parser not made: %v, GPU closed %d times", err, g3.closes)
	}
	g4 := &fakeGPU{lib: newFakeLib(h26x.H264), failBind: true}
	if _, err := newDecoder(g4.lib, g4, h26x.H264, Options{}, ""); err == nil || g4.closes != 1 {
		t.Errorf("context not current: %v, GPU closed %d times", err, g4.closes)
	}
	if _, err := newDecoder(newFakeLib(h26x.H264), &fakeGPU{}, h26x.Codec(9), Options{}, ""); !errors.Is(err, sensors.ErrFormat) {
		t.Errorf("codec 9: %v", err)
	}
}

// TestWriteDeviceCopiesToDeviceMemory: WriteDevice copies a picture into
// memory the GPU addresses (the fake's device memory), the same bytes as
// Write, and refuses a destination too small.
func TestWriteDeviceCopiesToDeviceMemory(t *testing.T) {
	d, _, g, _ := openFake(h26x.H264, Options{})
	defer d.Close()
	aus := testAUs(t, "h264_170x100.h264", h26x.H264)
	if err := d.Send(aus[0], 42); err != nil {
		t.Fatal(err)
	}
	id, f, ok, err := d.Receive()
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := d.WriteDevice(fakeDeviceBase+4096, f.FrameSize()-1); !errors.Is(err, sensors.ErrFormat) {
		t.Errorf("a destination one byte short: %v", err)
	}
	if _, err := d.WriteDevice(fakeDeviceBase+4096, f.FrameSize()); err != nil {
		t.Fatal(err)
	}
	checkPicture(t, g.device[4096:], f, int64(id))
}

// TestCallsAfterCloseAreErrors: a closed decoder refuses everything and
// Close is idempotent.
func TestCallsAfterCloseAreErrors(t *testing.T) {
	d, _, _, _ := openFake(h26x.H265, Options{})
	d.Close()
	if err := d.Send([]byte{0, 0, 0, 1, 0x40}, 0); !errors.Is(err, ErrDecode) {
		t.Errorf("Send after Close: %v", err)
	}
	if _, _, _, err := d.Receive(); !errors.Is(err, ErrDecode) {
		t.Errorf("Receive after Close: %v", err)
	}
	if err := d.Drain(); !errors.Is(err, ErrDecode) {
		t.Errorf("Drain after Close: %v", err)
	}
	if _, err := d.WriteDevice(fakeDeviceBase, 1<<20); !errors.Is(err, ErrDecode) {
		t.Errorf("WriteDevice after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
}
