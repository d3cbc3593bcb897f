package jpeg_test

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// scene is a natural-looking test image: smooth gradients and a few flat
// shapes with sharp edges (not noise, which JPEG codes unlike camera
// frames).
func scene(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.RGBA{uint8(40 + 180*x/w), uint8(30 + 200*y/h), uint8(200 - 150*(x+y)/(w+h)), 255}
			dx, dy := x-w/3, y-h/2
			if dx*dx+dy*dy < (h/5)*(h/5) {
				c = color.RGBA{230, 40, 50, 255}
			}
			if x > w*3/5 && x < w*4/5 && y > h/5 && y < h*4/5 {
				c = color.RGBA{250, 250, 245, 255}
			}
			if (x/(w/16)+y/(h/9))%7 == 0 && y > h*5/6 {
				c = color.RGBA{20, 20, 30, 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

func encode(t testing.TB, img image.Image, q int) []byte {
	var b bytes.Buffer
	if err := stdjpeg.Encode(&b, img, &stdjpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stripDHT removes every DHT segment before the first SOS, as MJPEG
// cameras send frames (image/jpeg encodes with the Annex K tables).
func stripDHT(t testing.TB, src []byte) []byte {
	out := []byte{0xff, 0xd8}
	i := 2
	for {
		m := src[i+1]
		if m == 0xda {
			return append(out, src[i:]...)
		}
		n := int(src[i+2])<<8 | int(src[i+3])
		if m != 0xc4 {
			out = append(out, src[i:i+2+n]...)
		}
		i += 2 + n
		if i+4 > len(src) {
			t.Fatal("no SOS")
		}
	}
}

func grey(img *image.RGBA) *image.Gray {
	g := image.NewGray(img.Bounds())
	for i := range g.Pix {
		p := img.Pix[4*i:]
		g.Pix[i] = pixconv.Luma(p[0], p[1], p[2])
	}
	return g
}

type sample struct {
	name string
	data []byte
}

// samples are the decoding test inputs: image/jpeg's own 4:2:0 and grey
// (also without DHT), and libjpeg's 4:2:0, 4:2:2, 4:4:4, grey and 4:2:0
// with restart markers (testdata/gen.c).
func samples(t testing.TB) []sample {
	img := scene(173, 101)
	go420 := encode(t, img, 85)
	s := []sample{
		{"go420", go420},
		{"gogrey", encode(t, grey(img), 85)},
		{"go420-nodht", stripDHT(t, go420)},
		{"gogrey-nodht", stripDHT(t, encode(t, grey(img), 85))},
	}
	for _, n := range []string{"s420", "s422", "s444", "grey", "rst420"} {
		b, err := os.ReadFile(filepath.Join("testdata", n+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		s = append(s, sample{"libjpeg-" + n, b})
	}
	return s
}

// reference decodes src with image/jpeg (after inserting the default DHT).
func reference(t testing.TB, src []byte) ([]byte, int, int) {
	src, err := jpeg.WithDefaultHuffman(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	img, err := stdjpeg.Decode(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	out := make([]byte, 3*w*h)
	if err := pixconv.ImageToRGB24(out, 3*w, img); err != nil {
		t.Fatal(err)
	}
	return out, w, h
}

func turbo(t testing.TB) *jpeg.Decoder {
	d, err := jpeg.New(jpeg.Options{Backend: jpeg.TurboJPEG})
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_TURBOJPEG") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// nvjpeg is the nvJPEG backend on CUDA device 0, copying to host memory
// (the direct path has its own test). Without nvJPEG or a GPU it skips,
// unless EDGED_REQUIRE_NVJPEG is set.
func nvjpeg(t testing.TB) *jpeg.Decoder {
	return nvjpegWith(t, jpeg.GPU{})
}

func nvjpegWith(t testing.TB, g jpeg.GPU) *jpeg.Decoder {
	d, err := jpeg.New(jpeg.Options{Backend: jpeg.NVJPEG, GPU: &g})
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_NVJPEG") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func std(t testing.TB) *jpeg.Decoder {
	d, err := jpeg.New(jpeg.Options{Backend: jpeg.Std})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// diff returns the largest channel difference and the mean absolute one.
func diff(a, b []byte) (int, float64) {
	m, sum := 0, 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		m = max(m, d)
		sum += d
	}
	return m, float64(sum) / float64(len(a))
}

func decoders(t *testing.T) map[string]func(testing.TB) *jpeg.Decoder {
	return map[string]func(testing.TB) *jpeg.Decoder{"turbo": turbo, "std": std, "nvjpeg": nvjpeg}
}

// TestFullScale: image/jpeg's backend is the reference exactly.
// libjpeg-turbo replicates chroma as image/jpeg does (TJFLAG_FASTUPSAMPLE)
// and converts with the same JFIF matrix, but its integer IDCT rounds
// differently: ±1 on the Y, Cb and Cr planes, which greyscale shows
// directly (tolerance 1). In colour, B = Y + 1.772 (Cb - 128) turns ±1 on Y
// and Cb into up to ±2.77, so ±3 per channel, with a mean absolute
// difference under 0.25 (measured: max 3, mean 0.19-0.20). nvJPEG (the
// H200's JPEG engines, CUDA 13) measured the same: max 3 (grey 1), mean
// 0.18-0.20, so it is held to the same bounds.
func TestFullScale(t *testing.T) {
	for name, mk := range decoders(t) {
		t.Run(name, func(t *testing.T) {
			d := mk(t)
			for _, s := range samples(t) {
				want, w, h := reference(t, s.data)
				got := make([]byte, 3*w*h+7)
				gw, gh, err := d.Decode(got, s.data, 1)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if gw != w || gh != h {
					t.Fatalf("%s: %dx%d, want %dx%d", s.name, gw, gh, w, h)
				}
				m, mean := diff(got[:3*w*h], want)
				t.Logf("%s: max diff %d, mean %.3f", s.name, m, mean)
				tol, meanTol := 0, 0.25
				switch name {
				case "turbo", "nvjpeg":
					tol = 3
					if strings.Contains(s.name, "grey") {
						tol = 1
					}
				}
				if m > tol || mean > meanTol {
					t.Errorf("%s: max channel difference %d from image/jpeg (mean %.3f), want <= %d (mean <= %.2f)", s.name, m, mean, tol, meanTol)
				}
				if hd, err := d.Header(s.data); err != nil || hd.Width != w || hd.Height != h {
					t.Errorf("%s: Header = %+v, %v", s.name, hd, err)
				}
			}
		})
	}
}

// TestScaled compares 1/2, 1/4 and 1/8 decodes with a box average of the
// full image/jpeg decode (the image/jpeg backend's own scaling, which
// matches it exactly). libjpeg's reduced IDCTs are not box filters: a 1/8
// decode is each 8x8 block's DC, the exact block mean except in the edge
// blocks of sizes that are not multiples of 8 (the encoder's padding
// counts); 1/2 and 1/4 are smoother than a box at sharp edges. Luma
// (BT.601 of the RGB) must be within a mean of 1 level. Colour within a
// mean of 1.5 levels, except 4:2:2: libjpeg-turbo scales every component's
// IDCT by the same factor, so a 4:2:2 frame keeps half the horizontal
// chroma resolution at the reduced size (a box of the full decode does
// not): chroma differs at colour edges, a mean of up to 8 levels measured
// 1.9-6.2. Single pixels at edges differ more (max 92), so no maximum is
// checked.
func TestScaled(t *testing.T) {
	for name, mk := range decoders(t) {
		t.Run(name, func(t *testing.T) {
			d := mk(t)
			if d.Backend().FullScaleOnly {
				if _, _, err := d.Decode(make([]byte, 1<<20), samples(t)[0].data, 2); !errors.Is(err, jpeg.ErrScale) {
					t.Errorf("%s does not scale, but 1/2 gave %v, want ErrScale", name, err)
				}
				return
			}
			for _, s := range samples(t) {
				full, fw, fh := reference(t, s.data)
				for _, den := range []int{2, 4, 8} {
					w, h := jpeg.ScaledSize(fw, fh, den)
					want := make([]byte, 3*w*h)
					jpeg.BoxDown(want, full, fw, fh, den)
					got := make([]byte, 3*w*h)
					gw, gh, err := d.Decode(got, s.data, den)
					if err != nil || gw != w || gh != h {
						t.Fatalf("%s 1/%d: %dx%d, %v; want %dx%d", s.name, den, gw, gh, err, w, h)
					}
					m, mean := diff(got, want)
					lm, lmean := diff(luma(got), luma(want))
					t.Logf("%s 1/%d: %dx%d max diff %d, mean %.3f; luma max %d, mean %.3f", s.name, den, w, h, m, mean, lm, lmean)
					tol := 1.5
					if strings.Contains(s.name, "422") {
						tol = 8
					}
					if mean > tol || lmean > 1 || (name == "std" && m > 0) {
						t.Errorf("%s 1/%d: max %d, mean %.3f, luma mean %.3f from the box-averaged reference", s.name, den, m, mean, lmean)
					}
				}
			}
			if _, _, err := d.Decode(make([]byte, 1<<16), samples(t)[0].data, 3); !errors.Is(err, jpeg.ErrScale) {
				t.Errorf("1/3: %v, want ErrScale", err)
			}
		})
	}
}

func luma(rgb []byte) []byte {
	y := make([]byte, len(rgb)/3)
	for i := range y {
		y[i] = pixconv.Luma(rgb[3*i], rgb[3*i+1], rgb[3*i+2])
	}
	return y
}

// corruptions are what cameras deliver besides good frames.
func corruptions(t testing.TB) []sample {
	good := samples(t)[0].data
	bad := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	_, sos, err := jpeg.Scan(good)
	if err != nil {
		t.Fatal(err)
	}
	return []sample{
		{"empty", nil},
		{"zero-byte", []byte{0}},
		{"soi-only", []byte{0xff, 0xd8}},
		{"zeros", make([]byte, 4096)},
		{"headers-only", good[:sos+14]},
		{"truncated-quarter", good[:len(good)/4]},
		{"truncated-half", good[:len(good)/2]},
		{"no-eoi", good[:len(good)-2]},
		{"no-eoi-zero-padded", append(append([]byte(nil), good[:len(good)/2]...), make([]byte, 1000)...)},
		{"bad-huffman", bad(func(b []byte) []byte {
			for i := sos + 40; i < len(b)-2; i += 7 {
				b[i] = 0xff // runs of invalid codes and bogus markers
			}
			return b
		})},
		{"bad-length", bad(func(b []byte) []byte { b[4], b[5] = 0xff, 0xf0; return b })},
		{"sof-zero-size", bad(func(b []byte) []byte {
			for i := 2; i+9 < len(b); i++ {
				if b[i] == 0xff && b[i+1] == 0xc0 {
					b[i+5], b[i+6], b[i+7], b[i+8] = 0, 0, 0, 0
					break
				}
			}
			return b
		})},
	}
}

// TestCorrupt: every broken frame is ErrCorrupt, on both backends.
func TestCorrupt(t *testing.T) {
	for name, mk := range decoders(t) {
		t.Run(name, func(t *testing.T) {
			d := mk(t)
			dst := make([]byte, 3*173*101)
			for _, c := range corruptions(t) {
				_, _, err := d.Decode(dst, c.data, 1)
				if !errors.Is(err, jpeg.ErrCorrupt) {
					t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
				} else {
					t.Logf("%s: %v", c.name, err)
				}
			}
			good := samples(t)[0].data
			if _, _, err := d.Decode(dst[:100], good, 1); !errors.Is(err, jpeg.ErrShort) {
				t.Errorf("small destination: %v, want ErrShort", err)
			}
			if _, _, err := d.Decode(dst, good, 1); err != nil {
				t.Errorf("good frame after the bad ones: %v", err)
			}
		})
	}
}

func TestNoAllocs(t *testing.T) {
	src := encode(t, scene(640, 480), 85)
	dst := make([]byte, 640*480*3)
	for name, mk := range map[string]func(testing.TB) *jpeg.Decoder{"turbo": turbo, "nvjpeg": nvjpeg} {
		t.Run(name, func(t *testing.T) {
			d := mk(t)
			for _, den := range []int{1, 4} {
				if den > 1 && d.Backend().FullScaleOnly {
					continue
				}
				for _, in := range [][]byte{src, stripDHT(t, src)} {
					n := testing.AllocsPerRun(20, func() {
						if _, _, err := d.Decode(dst, in, den); err != nil {
							t.Fatal(err)
						}
					})
					if n != 0 {
						t.Errorf("1/%d: %v allocations per frame, want 0", den, n)
					}
				}
			}
		})
	}
}

func TestChooseBackend(t *testing.T) {
	t.Setenv(jpeg.EnvBackend, "go")
	d, err := jpeg.New(jpeg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b := d.Backend(); b.Name != jpeg.Std || !strings.Contains(b.Why, "EDGED_JPEG=go") || b.Warning != "" {
		t.Errorf("EDGED_JPEG=go: %+v", b)
	}
	t.Setenv(jpeg.EnvBackend, "")
	d, err = jpeg.New(jpeg.Options{Library: "libturbojpeg-missing.so.9"})
	if err != nil {
		t.Fatal(err)
	}
	b := d.Backend()
	if b.Name != jpeg.Std || !(strings.Contains(b.Warning, "libturbojpeg0") || strings.Contains(b.Warning, "CGO_ENABLED=1")) || !(strings.Contains(b.String(), "libturbojpeg-missing.so.9") || strings.Contains(b.Why, "without cgo")) {
		t.Errorf("missing library: %+v", b)
	}
	if _, err := jpeg.New(jpeg.Options{Backend: jpeg.TurboJPEG, Library: "libturbojpeg-missing.so.9"}); !errors.Is(err, jpeg.ErrNoLibrary) {
		t.Errorf("backend = libjpeg-turbo without the library: %v", err)
	}
	t.Setenv(jpeg.EnvBackend, "nvjpeg")
	if nd, err := jpeg.New(jpeg.Options{GPU: &jpeg.GPU{Library: "libnvjpeg-missing.so.9"}}); err == nil {
		t.Errorf("EDGED_JPEG=nvjpeg with a missing library: %+v", nd.Backend())
		nd.Close()
	} else if !errors.Is(err, jpeg.ErrNoNVJPEG) {
		t.Errorf("EDGED_JPEG=nvjpeg with a missing library: %v, want ErrNoNVJPEG", err)
	}
	t.Setenv(jpeg.EnvBackend, "")
	// Auto with a GPU that cannot decode: the CPU decoders, saying why.
	if nd, err := jpeg.New(jpeg.Options{GPU: &jpeg.GPU{Library: "libnvjpeg-missing.so.9"}}); err != nil {
		t.Errorf("auto with nvJPEG missing: %v", err)
	} else {
		if b := nd.Backend(); b.Name == jpeg.NVJPEG || !strings.Contains(b.Why, "nvJPEG") {
			t.Errorf("auto with nvJPEG missing: %+v", b)
		}
		nd.Close()
	}
	d.Close()
	if _, _, err := d.Decode(make([]byte, 10), []byte{1}, 1); !errors.Is(err, jpeg.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestChooseScale(t *testing.T) {
	for _, c := range []struct {
		sw, sh, dw, dh int
		resize         string
		want           int
	}{
		{1920, 1080, 224, 224, jpeg.Stretch, 4},   // 1/8: 240x135 < 224 high
		{1920, 1080, 224, 224, jpeg.Letterbox, 8}, // samples 224x126: 240x135 covers it
		{1920, 1080, 640, 640, jpeg.Letterbox, 2}, // 640x360: 960x540
		{1920, 1080, 640, 640, jpeg.Stretch, 1},   // 640 high: 1/2 gives 540
		{1280, 720, 640, 360, jpeg.Stretch, 2},
		{640, 480, 640, 640, jpeg.Letterbox, 1},
		{1080, 1920, 224, 224, jpeg.Letterbox, 8}, // portrait: 126x224 from 135x240
		{1921, 1081, 241, 136, jpeg.Stretch, 8},   // TJSCALED rounds up: 241x136
		{1920, 1080, 0, 0, jpeg.Stretch, 1},
	} {
		got, why := jpeg.ChooseScale(c.sw, c.sh, c.dw, c.dh, c.resize)
		if got != c.want || why == "" {
			t.Errorf("%dx%d -> %dx%d %s: 1/%d (%s), want 1/%d", c.sw, c.sh, c.dw, c.dh, c.resize, got, why, c.want)
		}
	}
}

func TestDefaultHuffman(t *testing.T) {
	src := encode(t, scene(64, 48), 80)
	stripped := stripDHT(t, src)
	has, _, err := jpeg.Scan(stripped)
	if err != nil || has {
		t.Fatalf("Scan of a stripped frame: %v, %v", has, err)
	}
	out, err := jpeg.WithDefaultHuffman(nil, stripped)
	if err != nil {
		t.Fatal(err)
	}
	// image/jpeg encodes with the Annex K tables in one DHT per table.
	if len(out) != len(stripped)+420 || len(src) != len(stripped)+4*4+420-4 {
		t.Logf("sizes: original %d, stripped %d, restored %d", len(src), len(stripped), len(out))
	}
	a, _, _ := reference(t, src)
	b, _, _ := reference(t, out)
	if !bytes.Equal(a, b) {
		t.Error("the default tables decode differently from the encoder's")
	}
	same, err := jpeg.WithDefaultHuffman(nil, src)
	if err != nil || &same[0] != &src[0] {
		t.Error("a frame with DHT was copied")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range samples(f) {
		f.Add(s.data)
	}
	for _, c := range corruptions(f) {
		f.Add(c.data)
	}
	var decs []*jpeg.Decoder
	if d, err := jpeg.New(jpeg.Options{Backend: jpeg.TurboJPEG}); err == nil {
		decs = append(decs, d)
	}
	d, _ := jpeg.New(jpeg.Options{Backend: jpeg.Std})
	decs = append(decs, d)
	dst := make([]byte, 3*256*256)
	f.Fuzz(func(t *testing.T, src []byte) {
		if h, err := decs[len(decs)-1].Header(src); err != nil || h.Width*h.Height > 256*256 {
			return // keep image/jpeg's allocations small
		}
		for _, d := range decs {
			for _, den := range []int{1, 8} {
				w, h, err := d.Decode(dst, src, den)
				if err != nil && !errors.Is(err, jpeg.ErrCorrupt) && !errors.Is(err, jpeg.ErrShort) {
					t.Fatalf("%s: %v", d.Backend().Name, err)
				}
				if err == nil && (w <= 0 || h <= 0 || 3*w*h > len(dst)) {
					t.Fatalf("%s: %dx%d", d.Backend().Name, w, h)
				}
			}
		}
		_, _ = jpeg.WithDefaultHuffman(nil, src)
	})
}
