package replay

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// TestImageFolderSkipsWhatItCannotDecode: every image of a folder is
// judged by its header, against the folder's size, before it is decoded.
// A PNG declaring 65535x65535 16-bit RGBA (113 bytes; image/png would
// allocate 32 GiB for it: "fatal error: out of memory"), 30000x30000 and
// 16000x16000 ones, a JPEG of another size, a CMYK JPEG, junk, a file
// larger than any image of the folder's size and one that vanished are
// each skipped with ErrSkipped naming the file and why; the good images
// around them play, and the Go heap grows by far less than one of the
// declared images.
func TestImageFolderSkipsWhatItCannotDecode(t *testing.T) {
	dir := t.TempDir()
	red, blue := color.RGBA{200, 30, 30, 255}, color.RGBA{30, 60, 200, 255}
	writeImage(t, filepath.Join(dir, "00.png"), 32, 16, red)
	bad := map[string][]byte{
		"01-huge.png":  sensorstest.PNGClaiming(65535, 65535),
		"02-big.png":   sensorstest.PNGClaiming(30000, 30000),
		"03-2gb.png":   sensorstest.PNGClaiming(16000, 16000),
		"04-junk.png":  []byte("not an image at all"),
		"05-small.jpg": encodeJPEG(t, 16, 16),
		"06-cmyk.jpg":  readFile(t, "../jpeg/testdata/cmyk.jpg"),
		"07-torn.png":  sensorstest.PNGClaiming(32, 16)[:40],
	}
	for name, b := range bad {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A .png that is a JPEG of the right size: decoded by what it is.
	if err := os.WriteFile(filepath.Join(dir, "08-jpeg.png"), encodeJPEG(t, 32, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	// Larger than any 32x16 image can be: refused unread (sparse, no disk).
	if f, err := os.Create(filepath.Join(dir, "09-sparse.png")); err == nil {
		f.Write(sensorstest.PNGClaiming(32, 16))
		f.Truncate(imageFileLimit(32, 16) + 1)
		f.Close()
	}
	writeImage(t, filepath.Join(dir, "10-vanishes.png"), 32, 16, red)
	writeImage(t, filepath.Join(dir, "11.png"), 32, 16, blue)

	s, _ := startReplay(t, Options{Name: "imgs", Path: dir, FreeRun: true}, 2, 32*16*3)
	os.Remove(filepath.Join(dir, "10-vanishes.png"))
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	why := map[string]string{
		"01-huge.png":     "is a 65535x65535 PNG; the folder's images are 32x16",
		"02-big.png":      "is a 30000x30000 PNG",
		"03-2gb.png":      "is a 16000x16000 PNG",
		"04-junk.png":     "neither a PNG nor a JPEG file",
		"05-small.jpg":    "is a 16x16 JPEG",
		"06-cmyk.jpg":     "4 components (CMYK or YCCK)",
		"07-torn.png":     "unexpected EOF",
		"09-sparse.png":   "more than an image of the folder's size can take",
		"10-vanishes.png": "no such file",
	}
	played := 0
	for i := 0; i < 12; i++ {
		f, err := s.Next(context.Background())
		if err != nil {
			if !errors.Is(err, sensors.ErrSkipped) {
				t.Fatalf("image %d: %v, want ErrSkipped", i, err)
			}
			found := false
			for name, w := range why {
				if strings.Contains(err.Error(), name) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %v, want it to say %q", name, err, w)
					}
					delete(why, name)
					found = true
				}
			}
			if !found {
				t.Errorf("image %d skipped unexpectedly: %v", i, err)
			}
			continue
		}
		if f.Format.Width != 32 || f.Format.Height != 16 {
			t.Errorf("image %d: %v", i, f.Format)
		}
		f.Slot.Release()
		played++
	}
	goruntime.ReadMemStats(&after)
	if played != 3 || len(why) != 0 {
		t.Errorf("%d images played (want 3: 00, 08, 11), not skipped: %v", played, why)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the Go heap allocated %d MiB over one pass; something was decoded at its declared size", grew>>20)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrEOF) {
		t.Fatalf("after the pass: %v, want ErrEOF", err)
	}
}

// TestImageFolderGeometry: the folder's size is its first usable image's;
// a folder where no image is usable does not start, and a looping folder
// whose images all become unusable fails a whole pass (an error the
// caller backs off on) instead of skipping forever.
func TestImageFolderGeometry(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.png"), sensorstest.PNGClaiming(65535, 65535), 0o644)
	writeImage(t, filepath.Join(dir, "b.png"), 32, 16, color.RGBA{1, 2, 3, 255})
	if f, err := ProbeFolder(dir, 0); err != nil || f != (sensors.Format{Width: 32, Height: 16, Pixel: sensors.RGB24}) {
		t.Fatalf("ProbeFolder = %v, %v", f, err)
	}
	s, _ := startReplay(t, Options{Name: "imgs", Path: dir, FreeRun: true, Loop: true}, 2, 32*16*3)
	if f := s.Format(); f.Width != 32 || f.Height != 16 {
		t.Fatalf("format %v", f)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrSkipped) {
		t.Fatalf("a.png: %v", err)
	}
	next(t, s).Slot.Release()
	os.WriteFile(filepath.Join(dir, "b.png"), []byte("gone bad"), 0o644)
	var err error
	for i := 0; i < 3 && (err == nil || errors.Is(err, sensors.ErrSkipped)); i++ {
		_, err = s.Next(context.Background())
	}
	if err == nil || errors.Is(err, sensors.ErrSkipped) || !strings.Contains(err.Error(), "no image") {
		t.Fatalf("a pass with nothing usable: %v, want an error that is not a skip", err)
	}

	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "x.png"), sensorstest.PNGClaiming(20000, 20000), 0o644)
	src, _ := New(Options{Name: "bad", Path: empty})
	if err := src.Start(context.Background(), sensorstest.NewHeapPool(1, 16)); !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "20000x20000 is larger than 16384 pixels a side") {
		t.Fatalf("a folder of one oversized image: %v", err)
	}
}

func encodeJPEG(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readFile(t testing.TB, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzImageHeader: the header check of image folders never panics, and
// it agrees with the decoders: a size it accepts is the size image/png or
// image/jpeg reads from the same bytes, and what they call unsupported it
// does not accept.
func FuzzImageHeader(f *testing.F) {
	f.Add(sensorstest.PNGClaiming(65535, 65535))
	f.Add(sensorstest.PNGClaiming(3, 2))
	f.Add(encodeJPEG(f, 17, 9))
	var b bytes.Buffer
	png.Encode(&b, image.NewPaletted(image.Rect(0, 0, 5, 4), color.Palette{color.Black, color.White}))
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseImageHeader(data)
		if err != nil {
			if !errors.Is(err, errImage) {
				t.Fatalf("%v does not wrap errImage", err)
			}
			return
		}
		if h.Width <= 0 || h.Height <= 0 {
			t.Fatalf("accepted %+v", h)
		}
		var c image.Config
		var unsupported bool
		if h.Kind == kindPNG {
			c, err = png.DecodeConfig(bytes.NewReader(data))
			var u png.UnsupportedError
			unsupported = errors.As(err, &u)
		} else {
			c, err = jpeg.DecodeConfig(bytes.NewReader(data))
			var u jpeg.UnsupportedError
			unsupported = errors.As(err, &u)
		}
		if unsupported {
			t.Fatalf("accepted %+v; the decoder says %v", h, err)
		}
		if err == nil && (c.Width != h.Width || c.Height != h.Height) {
			t.Fatalf("header says %dx%d, the decoder %dx%d", h.Width, h.Height, c.Width, c.Height)
		}
	})
}
