package jpeg_test

import (
	"bytes"
	"errors"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors/jpeg"
)

// TestDecodersAgree: a frame one CPU decoder decodes and the other drops
// is refused by both, with the same reason, before either sees it.
// cmyk.jpg (Adobe CMYK) decoded on image/jpeg and failed on libjpeg-turbo
// ("Unsupported color conversion request"); arith420.jpg (arithmetic
// coding) decoded on libjpeg-turbo and failed on image/jpeg ("unknown
// marker"). A progressive frame decodes on both, the same.
func TestDecodersAgree(t *testing.T) {
	refused := map[string]string{"cmyk": "4 components (CMYK or YCCK)", "arith420": "arithmetic coding (SOF9)"}
	for name, mk := range decoders(t) {
		t.Run(name, func(t *testing.T) {
			d := mk(t)
			for file, why := range refused {
				src := readTestdata(t, file)
				dst := make([]byte, 3*131*77)
				_, _, err := d.Decode(dst, src, 1)
				if !errors.Is(err, jpeg.ErrUnsupported) || !errors.Is(err, jpeg.ErrCorrupt) || !strings.HasSuffix(err.Error(), why) {
					t.Errorf("%s: Decode = %v, want ErrUnsupported ending %q", file, err, why)
				}
				if _, err := d.Header(src); !errors.Is(err, jpeg.ErrUnsupported) || !strings.HasSuffix(err.Error(), why) {
					t.Errorf("%s: Header = %v, want ErrUnsupported ending %q", file, err, why)
				}
			}
			src := readTestdata(t, "prog420")
			want, w, h := reference(t, src)
			got := make([]byte, 3*w*h)
			if _, _, err := d.Decode(got, src, 1); err != nil {
				t.Fatalf("progressive: %v", err)
			}
			if m, mean := diff(got, want); m > 3 || mean > 0.25 {
				t.Errorf("progressive: max difference %d from image/jpeg (mean %.3f)", m, mean)
			}
		})
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".jpg"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jfif builds a stream: SOI, the segments given (marker, payload), SOS
// and EOI.
func jfif(segs ...any) []byte {
	b := []byte{0xff, 0xd8}
	for i := 0; i+1 < len(segs); i += 2 {
		m, p := segs[i].(int), segs[i+1].([]byte)
		b = append(b, 0xff, byte(m), byte((len(p)+2)>>8), byte(len(p)+2))
		b = append(b, p...)
	}
	return append(b, 0xff, 0xda, 0, 8, 1, 1, 0, 0, 63, 0, 0xff, 0xd9)
}

// sof is a SOF payload: precision, height, width, then per component id,
// sampling (h<<4|v) and table.
func sof(prec, h, w int, comps ...[3]byte) []byte {
	b := []byte{byte(prec), byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(len(comps))}
	for _, c := range comps {
		b = append(b, c[:]...)
	}
	return b
}

var (
	y22 = [3]byte{1, 0x22, 0}
	y11 = [3]byte{1, 0x11, 0}
	cb  = [3]byte{2, 0x11, 1}
	cr  = [3]byte{3, 0x11, 1}
)

func TestParseHeader(t *testing.T) {
	ok := sof(8, 480, 640, y22, cb, cr)
	for _, c := range []struct {
		name string
		src  []byte
		want jpeg.Header
		err  string // "" accepted; else a substring; unsupported marks ErrUnsupported
		uns  bool
	}{
		{"baseline 4:2:0", jfif(0xe0, []byte("JFIF\x00"), 0xc0, ok), jpeg.Header{Width: 640, Height: 480, Components: 3, Precision: 8, SOF: 0xc0}, "", false},
		{"progressive grey", jfif(0xc2, sof(8, 2, 65535, y11)), jpeg.Header{Width: 65535, Height: 2, Components: 1, Precision: 8, SOF: 0xc2}, "", false},
		{"extended, DQT, DHT, DRI, COM first", jfif(0xdb, make([]byte, 65), 0xc4, make([]byte, 17), 0xdd, []byte{0, 4}, 0xfe, []byte("hi"), 0xc1, ok),
			jpeg.Header{Width: 640, Height: 480, Components: 3, Precision: 8, SOF: 0xc1}, "", false},
		{"lossless", jfif(0xc3, ok), jpeg.Header{}, "lossless coding (SOF3)", true},
		{"hierarchical", jfif(0xc5, ok), jpeg.Header{}, "hierarchical coding (SOF5)", true},
		{"arithmetic", jfif(0xc9, ok), jpeg.Header{}, "arithmetic coding (SOF9)", true},
		{"arithmetic progressive", jfif(0xca, ok), jpeg.Header{}, "arithmetic coding (SOF10)", true},
		{"arithmetic lossless", jfif(0xcb, ok), jpeg.Header{}, "lossless arithmetic coding (SOF11)", true},
		{"hierarchical arithmetic", jfif(0xcf, ok), jpeg.Header{}, "hierarchical arithmetic coding (SOF15)", true},
		{"DAC", jfif(0xcc, []byte{0, 0}, 0xc0, ok), jpeg.Header{}, "DAC", true},
		{"12-bit", jfif(0xc1, sof(12, 8, 8, y11)), jpeg.Header{}, "12-bit samples", true},
		{"CMYK", jfif(0xc0, sof(8, 8, 8, y11, cb, cr, [3]byte{4, 0x11, 0})), jpeg.Header{}, "4 components", true},
		{"2 components", jfif(0xc0, sof(8, 8, 8, y11, cb)), jpeg.Header{}, "2 components", true},
		{"DNL height", jfif(0xc0, sof(8, 0, 8, y11)), jpeg.Header{}, "DNL", true},
		{"chroma larger than luma", jfif(0xc0, sof(8, 8, 8, y11, [3]byte{2, 0x22, 1}, [3]byte{3, 0x22, 1})), jpeg.Header{}, "chroma subsampling", true},
		{"chroma planes differ", jfif(0xc0, sof(8, 8, 8, y22, cb, [3]byte{3, 0x21, 1})), jpeg.Header{}, "chroma subsampling", true},
		{"luma 3x1", jfif(0xc0, sof(8, 8, 8, [3]byte{1, 0x31, 0}, cb, cr)), jpeg.Header{}, "sampling factors 3x1", true},
		{"grey 1x3", jfif(0xc0, sof(8, 8, 8, [3]byte{1, 0x13, 0})), jpeg.Header{}, "sampling factors 1x3", true},
		{"JPG13 marker", jfif(0xfd, []byte{1}, 0xc0, ok), jpeg.Header{}, "marker 0xfd", true},
		{"width 0", jfif(0xc0, sof(8, 8, 0, y11)), jpeg.Header{}, "width 0", false},
		{"repeated component", jfif(0xc0, sof(8, 8, 8, y11, cb, [3]byte{2, 0x11, 1})), jpeg.Header{}, "repeated", false},
		{"sampling 0", jfif(0xc0, sof(8, 8, 8, [3]byte{1, 0x01, 0})), jpeg.Header{}, "sampling factors", false},
		{"table 4", jfif(0xc0, sof(8, 8, 8, [3]byte{1, 0x11, 4})), jpeg.Header{}, "quantisation table", false},
		{"SOF length", jfif(0xc0, append(sof(8, 8, 8, y11), 0)), jpeg.Header{}, "SOF of 10 bytes", false},
		{"two SOFs", jfif(0xc0, ok, 0xc2, ok), jpeg.Header{}, "second SOF", false},
		{"no SOF", jfif(0xe0, []byte("JFIF\x00")), jpeg.Header{}, "SOS before any SOF", false},
		{"reserved marker", jfif(0x02, []byte{1}, 0xc0, ok), jpeg.Header{}, "reserved marker", false},
		{"no SOI", []byte{0xff, 0xd9, 0, 0}, jpeg.Header{}, "no SOI", false},
		{"overrun", []byte{0xff, 0xd8, 0xff, 0xc0, 0xff, 0xff, 8}, jpeg.Header{}, "overruns", false},
		{"truncated", jfif(0xc0, ok)[:15], jpeg.Header{}, "", false},
	} {
		h, err := jpeg.ParseHeader(c.src)
		switch {
		case c.name == "truncated":
			if err == nil {
				t.Errorf("%s: accepted", c.name)
			}
		case c.err == "":
			if err != nil || h != c.want {
				t.Errorf("%s: %+v, %v; want %+v", c.name, h, err, c.want)
			}
		case err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, jpeg.ErrCorrupt) || errors.Is(err, jpeg.ErrUnsupported) != c.uns:
			t.Errorf("%s: %v; want an error with %q (unsupported: %v)", c.name, err, c.err, c.uns)
		}
	}
}

// FuzzParseHeader: ParseHeader never panics or reads out of bounds, and
// it accepts nothing image/jpeg calls unsupported: a header both read has
// the same size. (image/jpeg may still find a frame ParseHeader accepts
// corrupt: its Huffman and quantisation tables are parsed; that is a drop
// on every backend.)
func FuzzParseHeader(f *testing.F) {
	for _, n := range []string{"s420", "s422", "s444", "grey", "rst420", "cmyk", "arith420", "prog420"} {
		f.Add(readTestdata(f, n))
	}
	f.Add(jfif(0xc0, sof(8, 480, 640, y22, cb, cr)))
	f.Fuzz(func(t *testing.T, src []byte) {
		h, err := jpeg.ParseHeader(src)
		if err != nil {
			if !errors.Is(err, jpeg.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if h.Width <= 0 || h.Height <= 0 || h.Width > jpeg.MaxSide || h.Height > jpeg.MaxSide || h.Precision != 8 || (h.Components != 1 && h.Components != 3) {
			t.Fatalf("accepted %+v", h)
		}
		full, err := jpeg.WithDefaultHuffman(nil, src)
		if err != nil {
			t.Fatalf("ParseHeader accepted what Scan refuses: %v", err)
		}
		c, err := stdjpeg.DecodeConfig(bytes.NewReader(full))
		var unsupported stdjpeg.UnsupportedError
		switch {
		case errors.As(err, &unsupported):
			t.Fatalf("ParseHeader accepted %+v, image/jpeg says %v", h, err)
		case err == nil && (c.Width != h.Width || c.Height != h.Height):
			t.Fatalf("ParseHeader says %dx%d, image/jpeg %dx%d", h.Width, h.Height, c.Width, c.Height)
		}
	})
}
