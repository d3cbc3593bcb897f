package synthetic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/demoscene"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/pixconv"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

func start(t testing.TB, o Options, slots int) (*Source, *sensorstest.Pool) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(slots, s.Format().FrameSize())
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		if m := pool.Misuses(); len(m) > 0 {
			t.Errorf("slot misuse: %v", m)
		}
	})
	return s, pool
}

func absdiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// expect returns the colour a correct decoder sees for c in format p.
func expect(c demoscene.RGB, p sensors.PixelFormat) demoscene.RGB {
	if p == sensors.GREY {
		l := pixconv.Luma(c.R, c.G, c.B)
		return demoscene.RGB{R: l, G: l, B: l}
	}
	return c
}

func near(got []byte, want demoscene.RGB, tol int) bool {
	return absdiff(got[0], want.R) <= tol && absdiff(got[1], want.G) <= tol && absdiff(got[2], want.B) <= tol
}

func TestFormatsRenderScene(t *testing.T) {
	for _, pix := range sensors.PixelFormats() {
		t.Run(pix.String(), func(t *testing.T) {
			o := Options{Name: "cam", Width: 160, Height: 120, Pixel: pix, Seed: 7, PeriodFrames: 3}
			s, _ := start(t, o, 2)
			tol := 3 // BT.601 limited-range round trip
			if pix == sensors.MJPEG {
				tol = 12
			}
			rgb := make([]byte, 160*120*3)
			for i := 0; i < 30; i++ {
				f, err := s.Next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if f.Seq != uint64(i) {
					t.Fatalf("frame %d has Seq %d", i, f.Seq)
				}
				if err := pixconv.ToRGB24(rgb, f.Format, f.Data()); err != nil {
					t.Fatal(err)
				}
				f.Slot.Release()
				tr := s.Truth(f.Seq)
				if want := int((f.Seq / 3) % 8); tr.Background != want {
					t.Fatalf("seq %d: truth background %d, want %d", f.Seq, tr.Background, want)
				}
				bg := expect(demoscene.Palette[tr.Background], pix)
				wh := expect(demoscene.SquareColor, pix)
				px := func(x, y int) []byte { return rgb[3*(160*y+x):] }
				// Square centre and a corner far from it.
				cx, cy := int(tr.CenterX), int(tr.CenterY)
				if !near(px(cx, cy), wh, tol) {
					t.Fatalf("seq %d: centre (%d,%d) = %v, want %v", f.Seq, cx, cy, px(cx, cy)[:3], wh)
				}
				fx, fy := 2, 2
				if tr.X < 40 && tr.Y < 40 {
					fx, fy = 157, 117
				}
				if !near(px(fx, fy), bg, tol) {
					t.Fatalf("seq %d: background (%d,%d) = %v, want %v (palette %d)", f.Seq, fx, fy, px(fx, fy)[:3], bg, tr.Background)
				}
				if pix == sensors.MJPEG {
					continue // edges ring in JPEG; the interior checks suffice
				}
				// Raw formats: the square is exactly where Truth says.
				var n, sx, sy float64
				for y := 0; y < 120; y++ {
					for x := 0; x < 160; x++ {
						p := px(x, y)
						in := x >= tr.X && x < tr.X+tr.Side && y >= tr.Y && y < tr.Y+tr.Side
						want := bg
						if in {
							want = wh
						}
						if !near(p, want, tol) {
							t.Fatalf("seq %d: pixel (%d,%d) = %v, want %v (square at %d,%d side %d)", f.Seq, x, y, p[:3], want, tr.X, tr.Y, tr.Side)
						}
						if min(p[0], p[1], p[2]) > 200 {
							n++
							sx += float64(x) + 0.5
							sy += float64(y) + 0.5
						}
					}
				}
				if n != float64(tr.Side*tr.Side) || math.Abs(sx/n-tr.CenterX) > 1e-9 || math.Abs(sy/n-tr.CenterY) > 1e-9 {
					t.Fatalf("seq %d: %v white pixels centred (%g,%g), truth %d² at (%g,%g)", f.Seq, n, sx/n, sy/n, tr.Side, tr.CenterX, tr.CenterY)
				}
			}
		})
	}
}

func TestSquareMoves(t *testing.T) {
	o := Options{Width: 640, Height: 480, Seed: 1}
	seen := map[[2]int]bool{}
	for seq := uint64(0); seq < 100; seq++ {
		tr := TruthAt(o, seq)
		if tr.X < 0 || tr.Y < 0 || tr.X+tr.Side > 640 || tr.Y+tr.Side > 480 {
			t.Fatalf("seq %d: square %+v leaves the frame", seq, tr)
		}
		if tr.X%2 != 0 || tr.Y%2 != 0 || tr.Side%2 != 0 {
			t.Fatalf("seq %d: square %+v not on even pixels", seq, tr)
		}
		seen[[2]int{tr.X, tr.Y}] = true
	}
	if len(seen) < 50 {
		t.Fatalf("square visited only %d positions in 100 frames", len(seen))
	}
	if tr := TruthAt(o, 0); tr.Side != 80 {
		t.Fatalf("default side %d, want 80 (min(640,480)/6)", tr.Side)
	}
}

func TestDeterminism(t *testing.T) {
	o := Options{Width: 64, Height: 48, Pixel: sensors.YUYV, Seed: 42}
	a, _ := start(t, o, 1)
	b, _ := start(t, o, 1)
	o.Seed = 43
	c, _ := start(t, o, 1)
	differs := false
	for i := 0; i < 40; i++ {
		fa, err := a.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fb, err := b.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fc, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fa.Data(), fb.Data()) {
			t.Fatalf("frame %d differs between two sources with the same seed", i)
		}
		if !bytes.Equal(fa.Data(), fc.Data()) {
			differs = true
		}
		fa.Slot.Release()
		fb.Slot.Release()
		fc.Slot.Release()
	}
	if !differs {
		t.Fatal("seeds 42 and 43 drew identical frames")
	}
}

func TestSeqAndTimestampsMonotonic(t *testing.T) {
	s, _ := start(t, Options{Width: 32, Height: 32, Pixel: sensors.RGB24, FPS: 400}, 2)
	before := sensors.Now()
	var last int64
	for i := 0; i < 20; i++ {
		f, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if f.Seq != uint64(i) || f.TCapture < before || f.TCapture <= last {
			t.Fatalf("frame %d: seq %d t %d (previous t %d, start %d)", i, f.Seq, f.TCapture, last, before)
		}
		last = f.TCapture
		f.Slot.Release()
	}
	// A frame clock never runs early: 20 frames at 400 fps span at least
	// 19 periods (a lower bound only; no upper bound on a loaded machine).
	if span := time.Duration(sensors.Now() - before); span < 19*2500*time.Microsecond {
		t.Fatalf("20 frames at 400 fps took only %v", span)
	}
}

func TestSeqContinuesAcrossRestart(t *testing.T) {
	s, pool := start(t, Options{Width: 32, Height: 32, Pixel: sensors.GREY}, 1)
	f, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.Slot.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	f, err = s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Slot.Release()
	if f.Seq != 1 {
		t.Fatalf("first frame after restart has Seq %d, want 1", f.Seq)
	}
}

// TestSourceContract: a Next waiting for a free slot (the test holds the
// only one) or for the frame clock (1000 s away) wakes on cancel and on
// Close, and no slot stays leased (sensorstest.CheckSource).
func TestSourceContract(t *testing.T) {
	for _, c := range []struct {
		name string
		fps  float64
	}{{"waiting for a slot", 0}, {"waiting for the clock", 0.001}} {
		t.Run(c.name, func(t *testing.T) {
			s, pool := start(t, Options{Width: 32, Height: 32, Pixel: sensors.GREY, FPS: c.fps}, 1)
			held, err := s.Next(context.Background()) // the only slot; the first frame is immediate
			if err != nil {
				t.Fatal(err)
			}
			if c.fps > 0 { // wait for the clock, not for the slot
				held.Slot.Release()
				held.Slot = nil
			}
			sensorstest.CheckSource(t, sensorstest.SourceCase{Source: s, Pool: pool, Pacing: c.fps > 0, Release: func() {
				if held.Slot != nil {
					held.Slot.Release()
				}
			}})
		})
	}
}

func TestOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Name: "odd", Width: 33, Height: 32, Pixel: sensors.YUYV},
		{Name: "oddnv12", Width: 32, Height: 31, Pixel: sensors.NV12},
		{Name: "square", Width: 32, Height: 32, Square: 40},
		{Name: "fps", FPS: -1},
		{Name: "pix", Pixel: sensors.PixelFormat(0x34325258)},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v: no error", o)
		} else if !bytes.Contains([]byte(err.Error()), []byte(o.Name)) {
			t.Errorf("error %q does not name the source %q", err, o.Name)
		}
	}
}

func TestSlotTooSmall(t *testing.T) {
	s, err := New(Options{Width: 32, Height: 32, Pixel: sensors.RGB24})
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(1, 100)
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(context.Background()); err == nil {
		t.Fatal("no error for a 100-byte slot")
	}
	if pool.Leased() != 0 {
		t.Fatal("slot leaked on error")
	}
}

func TestNoAllocsPerFrame(t *testing.T) {
	for _, pix := range sensors.PixelFormats() {
		if pix == sensors.MJPEG {
			continue // the documented slow path: image/jpeg allocates
		}
		s, _ := start(t, Options{Width: 320, Height: 240, Pixel: pix}, 2)
		ctx, cancel := context.WithCancel(context.Background())
		n := sensorstest.Mallocs(50, func() {
			f, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f.Slot.Release()
		})
		cancel()
		if n != 0 {
			t.Errorf("%s: %v allocations in 50 frames, want 0", pix, n)
		}
	}
}

func BenchmarkDraw(b *testing.B) {
	for _, size := range [][2]int{{640, 480}, {1920, 1080}} {
		for _, pix := range sensors.PixelFormats() {
			b.Run(fmt.Sprintf("%dx%d/%s", size[0], size[1], pix), func(b *testing.B) {
				s, _ := start(b, Options{Width: size[0], Height: size[1], Pixel: pix}, 2)
				ctx := context.Background()
				b.SetBytes(int64(s.Format().FrameSize()))
				b.ReportAllocs()
				for b.Loop() {
					f, err := s.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					f.Slot.Release()
				}
			})
		}
	}
}

// TestMJPEGDecoded: an MJPEG synthetic camera delivers decoded RGB24 (the
// configuration "format = MJPEG" must not reach preprocessing as JPEG),
// at the decode target's scale; Encoded keeps the JPEG bytes.
func TestMJPEGDecoded(t *testing.T) {
	o := Options{Name: "cam", Width: 320, Height: 240, Pixel: sensors.MJPEG, Seed: 7}
	s, _ := start(t, o, 2)
	if f := s.Format(); f != (sensors.Format{Width: 320, Height: 240, Pixel: sensors.RGB24}) {
		t.Fatalf("format %v", f)
	}
	if line := s.SetDecodeTarget(64, 64, "stretch"); !strings.Contains(line, "1/2") {
		t.Errorf("SetDecodeTarget: %q", line) // 1/4 would give 80x60 < 64 high
	}
	f, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Slot.Release()
	if want := (sensors.Format{Width: 160, Height: 120, Pixel: sensors.RGB24, Downscale: 2}); f.Format != want || s.Format() != want || f.BytesUsed != 160*120*3 {
		t.Fatalf("frame %v (%d bytes), source %v", f.Format, f.BytesUsed, s.Format())
	}
	tr := s.Truth(f.Seq)
	cx, cy := int(tr.CenterX)/2, int(tr.CenterY)/2 // camera pixels to frame pixels
	if p := f.Data()[3*(160*cy+cx):]; !near(p, expect(demoscene.SquareColor, sensors.RGB24), 12) {
		t.Errorf("square centre at (%d,%d) of the 1/2 frame: %v", cx, cy, p[:3])
	}

	e, _ := start(t, Options{Width: 64, Height: 48, Pixel: sensors.MJPEG, Encoded: true}, 2)
	g, err := e.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Slot.Release()
	if g.Format.Pixel != sensors.MJPEG || !bytes.HasPrefix(g.Data(), []byte{0xff, 0xd8}) || e.SetDecodeTarget(8, 8, "stretch") != "" {
		t.Fatalf("Encoded: %v %x", g.Format, g.Data()[:4])
	}
}
