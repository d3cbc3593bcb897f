package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	sjpeg "github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/pixconv"
	"github.com/edged-dev/edged/sensors/sensorstest"
	"github.com/edged-dev/edged/sensors/synthetic"
)

const waitLimit = 20 * time.Second

// record writes n synthetic frames, deltaMs apart, and returns the file
// and the frames' bytes.
func record(t testing.TB, n int, deltaMs int64, pix sensors.PixelFormat) (string, [][]byte) {
	t.Helper()
	cam, err := synthetic.New(synthetic.Options{Width: 64, Height: 48, Pixel: pix, Seed: 3, FPS: 0, Encoded: true})
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(2, cam.Format().FrameSize())
	if err := cam.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	path := filepath.Join(t.TempDir(), "cam.edgedraw")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f := cam.Format()
	f.FPS = 1000 / float64(deltaMs)
	rec, err := NewRecorder(out, f)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for i := 0; i < n; i++ {
		fr, err := cam.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.WriteFrame(fr.Data(), int64(i)*deltaMs*1e6, uint32(i)); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, bytes.Clone(fr.Data()))
		fr.Slot.Release()
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path, frames
}

func startReplay(t testing.TB, o Options, slots, size int) (*Source, *sensorstest.Pool) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(slots, size)
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if pool.Leased() != 0 {
			t.Errorf("%d slots leased after Close", pool.Leased())
		}
	})
	return s, pool
}

func next(t testing.TB, s *Source) sensors.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	f, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRawFileRoundTrip(t *testing.T) {
	for _, pix := range []sensors.PixelFormat{sensors.YUYV, sensors.NV12, sensors.MJPEG} {
		t.Run(pix.String(), func(t *testing.T) {
			path, frames := record(t, 6, 10, pix)
			s, _ := startReplay(t, Options{Name: "rp", Path: path, FreeRun: true}, 2, 64*48*3)
			out := pix
			if pix == sensors.MJPEG {
				out = sensors.RGB24 // decoded
			}
			if f := s.Format(); f.Width != 64 || f.Height != 48 || f.Pixel != out || f.FPS != 100 {
				t.Fatalf("format %v", f)
			}
			for i, want := range frames {
				if pix == sensors.MJPEG {
					want = decoded(t, want)
				}
				f := next(t, s)
				if f.Seq != uint64(i) || !bytes.Equal(f.Data(), want) || f.Flags != uint32(i) {
					t.Fatalf("frame %d: seq %d, %d bytes (want %d), flags %d", i, f.Seq, f.BytesUsed, len(want), f.Flags)
				}
				f.Slot.Release()
			}
			if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrEOF) {
				t.Fatalf("after the last frame: %v, want ErrEOF", err)
			}
		})
	}
}

// decoded is the RGB24 image of a JPEG frame, by the decoder replay uses.
func decoded(t testing.TB, src []byte) []byte {
	d, err := sjpeg.New(sjpeg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h, err := d.Header(src)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 3*h.Width*h.Height)
	if _, _, err := d.Decode(out, src, 1); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMJPEGFile: a recording of an MJPEG camera replays as decoded RGB24
// frames, at the decode target's scale, and its corrupt frames come out
// flagged FlagError (dropped and counted by the consumer), not torn.
func TestMJPEGFile(t *testing.T) {
	cam, err := synthetic.New(synthetic.Options{Width: 320, Height: 240, Pixel: sensors.MJPEG, Seed: 3, Encoded: true})
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(2, 320*240*3)
	if err := cam.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	defer cam.Close()
	path := filepath.Join(t.TempDir(), "mjpeg.edgedraw")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewRecorder(out, cam.Format())
	if err != nil {
		t.Fatal(err)
	}
	fr, err := cam.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	good := bytes.Clone(fr.Data())
	fr.Slot.Release()
	for i, b := range [][]byte{good, good[:len(good)/2], {0}, good} {
		if err := rec.WriteFrame(b, int64(i)*1e6, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	s, err := New(Options{Name: "rp", Path: path, FreeRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if line := s.SetDecodeTarget(80, 60, "letterbox"); line != "" {
		t.Errorf("before Start: %q", line)
	}
	pool2 := sensorstest.NewHeapPool(2, 320*240*3)
	if err := s.Start(context.Background(), pool2); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := sensors.Format{Width: 80, Height: 60, Pixel: sensors.RGB24, Downscale: 4}
	if f := s.Format(); f != want {
		t.Fatalf("format %v, want %v", f, want)
	}
	if line := s.SetDecodeTarget(80, 60, "letterbox"); !strings.Contains(line, "1/4") {
		t.Errorf("SetDecodeTarget: %q", line)
	}
	for i, bad := range []bool{false, true, true, false} {
		f := next(t, s)
		if bad != (f.Flags&sensors.FlagError != 0) || (!bad && (f.Format != want || f.BytesUsed != 80*60*3)) || (bad && f.BytesUsed != 0) {
			t.Fatalf("frame %d: flags %#x, %v, %d bytes", i, f.Flags, f.Format, f.BytesUsed)
		}
		f.Slot.Release()
	}
}

// TestRecordedPace: frames recorded 50 ms apart are replayed no faster,
// and the pacing wait comes before the fill, so that TCapture is when the
// frame was due and TCapture..TReady the read of the frame alone. Frame i
// is due i×50 ms after the first Next at the earliest (the schedule never
// moves back; a late consumer only moves it on), so its TCapture is never
// before that: a lower bound that a loaded machine cannot break, and that
// a wait after the fill would (TCapture would be when Next was called,
// about a gap too early).
func TestRecordedPace(t *testing.T) {
	const gap = 50 * time.Millisecond
	path, _ := record(t, 6, gap.Milliseconds(), sensors.GREY)
	s, _ := startReplay(t, Options{Name: "rp", Path: path}, 2, 64*48)
	// The schedule starts when the first Next paces its frame: at or after
	// asked, at or before the frame's TCapture (the goroutine can be held
	// between the two on a loaded or emulated machine, so the first
	// TCapture may be late by as much, and the next frame, due on the
	// schedule, follow it sooner than the gap).
	asked := sensors.Now()
	start := time.Now()
	var last int64
	for i := 0; i < 6; i++ {
		f := next(t, s)
		f.Slot.Release()
		if f.TCapture <= last {
			t.Fatal("TCapture not increasing")
		}
		// The pacing wait comes before the fill: TCapture..TReady is the
		// read of the frame alone, a small part of the 50 ms gap (the wait
		// stamped into it would be most of the gap).
		if f.TReady < f.TCapture || f.TReady-f.TCapture > int64(gap/2) {
			t.Fatalf("frame %d: fill from %d to %d", i, f.TCapture, f.TReady)
		}
		// Never ahead of the recorded schedule. (A frame may follow the
		// one before it at once when that one was late: a consumer that
		// fell behind gets no burst, the schedule starts again from it, so
		// it only moves later; a loaded machine does that.)
		if ahead := asked + int64(i)*int64(gap) - f.TCapture; ahead > int64(5*time.Millisecond) {
			t.Fatalf("frame %d: %v ahead of the recorded pace (%v after the previous one)", i, time.Duration(ahead), time.Duration(f.TCapture-last))
		}
		last = f.TCapture
	}
	// Five recorded gaps: never faster (a lower bound only).
	if d := time.Since(start); d < 5*gap {
		t.Fatalf("6 frames recorded %v apart replayed in %v", gap, d)
	}
}

func TestLoop(t *testing.T) {
	path, frames := record(t, 3, 10, sensors.RGB24)
	s, _ := startReplay(t, Options{Name: "rp", Path: path, Loop: true, FreeRun: true}, 2, 64*48*3)
	for i := 0; i < 8; i++ {
		f := next(t, s)
		if f.Seq != uint64(i) || !bytes.Equal(f.Data(), frames[i%3]) {
			t.Fatalf("frame %d is not recorded frame %d", i, i%3)
		}
		f.Slot.Release()
	}
}

func writeImage(t *testing.T, path string, w, h int, c color.RGBA) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if filepath.Ext(path) == ".png" {
		err = png.Encode(f, img)
	} else {
		err = jpeg.Encode(f, img, &jpeg.Options{Quality: 95})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestImageFolder(t *testing.T) {
	dir := t.TempDir()
	red, green, blue := color.RGBA{200, 30, 30, 255}, color.RGBA{30, 170, 40, 255}, color.RGBA{30, 60, 200, 255}
	writeImage(t, filepath.Join(dir, "b.png"), 32, 16, green)
	writeImage(t, filepath.Join(dir, "a.png"), 32, 16, red)
	writeImage(t, filepath.Join(dir, "c.JPG"), 32, 16, blue)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644)
	for _, pix := range []sensors.PixelFormat{sensors.RGB24, sensors.YUYV, sensors.NV12, sensors.BGR24} {
		t.Run(pix.String(), func(t *testing.T) {
			s, _ := startReplay(t, Options{Name: "imgs", Path: dir, Pixel: pix}, 2, 32*16*3)
			f0 := s.Format()
			if f0.Width != 32 || f0.Height != 16 || f0.Pixel != pix {
				t.Fatalf("format %v", f0)
			}
			rgb := make([]byte, 32*16*3)
			for i, want := range []color.RGBA{red, green, blue} {
				f := next(t, s)
				if err := pixconv.ToRGB24(rgb, f.Format, f.Data()); err != nil {
					t.Fatal(err)
				}
				f.Slot.Release()
				tol := 4
				if i == 2 {
					tol = 8 // JPEG
				}
				for c, w := range []uint8{want.R, want.G, want.B} {
					if d := int(rgb[3*40+c]) - int(w); d > tol || d < -tol {
						t.Fatalf("image %d channel %d = %d, want %d", i, c, rgb[3*40+c], w)
					}
				}
			}
			if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrEOF) {
				t.Fatalf("want ErrEOF, got %v", err)
			}
		})
	}
	writeImage(t, filepath.Join(dir, "d.png"), 16, 16, red)
	s, _ := startReplay(t, Options{Name: "imgs", Path: dir, FreeRun: true}, 2, 32*16*3)
	for i := 0; i < 3; i++ {
		next(t, s).Slot.Release()
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrSkipped) || !strings.Contains(err.Error(), "d.png is a 16x16 PNG; the folder's images are 32x16") {
		t.Fatalf("odd-sized image: %v, want ErrSkipped naming it", err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrEOF) {
		t.Fatalf("after the odd-sized image: %v, want ErrEOF", err)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		path string
		data []byte
		want error
	}{
		{"missing", filepath.Join(dir, "nope.edgedraw"), nil, sensors.ErrNotFound},
		{"empty dir", filepath.Join(dir, "empty"), nil, sensors.ErrNotFound},
		{"magic", filepath.Join(dir, "bad.edgedraw"), []byte("NOTEDGED00000000000000000000000000"), ErrCorrupt},
		{"short", filepath.Join(dir, "short.edgedraw"), []byte("EDGEDRAW"), ErrCorrupt},
	} {
		if c.name == "empty dir" {
			os.Mkdir(c.path, 0o755)
		} else if c.data != nil {
			os.WriteFile(c.path, c.data, 0o644)
		}
		s, err := New(Options{Name: c.name, Path: c.path})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start(context.Background(), sensorstest.NewHeapPool(1, 16))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestTruncatedAndOversizeRecords(t *testing.T) {
	path, _ := record(t, 2, 10, sensors.GREY)
	data, _ := os.ReadFile(path)
	trunc := filepath.Join(t.TempDir(), "t.edgedraw")
	os.WriteFile(trunc, data[:len(data)-10], 0o644)
	s, _ := startReplay(t, Options{Name: "rp", Path: trunc, FreeRun: true}, 1, 64*48)
	next(t, s).Slot.Release()
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated frame: %v", err)
	}
	big := bytes.Clone(data)
	big[headerSize] = 0xFF // length of the first record: larger than a frame
	big[headerSize+1] = 0xFF
	os.WriteFile(trunc, big, 0o644)
	s2, _ := startReplay(t, Options{Name: "rp", Path: trunc, FreeRun: true}, 1, 64*48)
	if _, err := s2.Next(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oversize record: %v", err)
	}
}

// TestSourceContract: a Next waiting for the recording's pace (1000 s
// away) or for a free slot (free-running; the test holds the only one)
// wakes on cancel and on Close, and no slot stays leased
// (sensorstest.CheckSource).
func TestSourceContract(t *testing.T) {
	path, _ := record(t, 3, 10, sensors.GREY)
	for _, o := range []Options{{FPS: 0.001}, {FreeRun: true}} {
		o.Name, o.Path = "rp", path
		s, pool := startReplay(t, o, 1, 64*48)
		held := next(t, s) // paced: the first is immediate; pool: the only slot
		if !o.FreeRun {    // wait for the pace, not for the slot
			held.Slot.Release()
			held.Slot = nil
		}
		sensorstest.CheckSource(t, sensorstest.SourceCase{Source: s, Pool: pool, Pacing: !o.FreeRun, Release: func() {
			if held.Slot != nil {
				held.Slot.Release()
			}
		}})
	}
}

func TestNoAllocsPerFrame(t *testing.T) {
	path, _ := record(t, 4, 10, sensors.YUYV)
	s, _ := startReplay(t, Options{Name: "rp", Path: path, FreeRun: true, Loop: true}, 2, 64*48*2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 50 frames of a 4-frame file: the loop's rewinds included.
	n := sensorstest.Mallocs(50, func() {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f.Slot.Release()
	})
	if n != 0 {
		t.Fatalf("%v allocations in 50 replayed frames", n)
	}
}

func FuzzFrameFile(f *testing.F) {
	var b bytes.Buffer
	rec, _ := NewRecorder(&b, sensors.Format{Width: 4, Height: 2, Pixel: sensors.GREY})
	rec.WriteFrame(make([]byte, 8), 0, 0)
	rec.WriteFrame(make([]byte, 8), 1000, 1)
	rec.Flush()
	f.Add(b.Bytes())
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := newFrameReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		if fr.max > 4*maxDim*maxDim*3 {
			t.Fatalf("frame bound %d", fr.max)
		}
		dst := make([]byte, 1<<12)
		for i := 0; i < 64; i++ {
			rec, err := fr.next(dst)
			if err != nil {
				return
			}
			if rec.Length > len(dst) || rec.Length > fr.max || rec.DeltaNs < 0 {
				t.Fatalf("accepted record %+v", rec)
			}
		}
	})
}

// TestCancelledWaitKeepsTheFrame: a paced Next whose context ends while it
// waits for the frame's time has already read the frame's header; the
// next Next must deliver that frame, not read its body as a header (seen
// as a "corrupt frame file" under qemu, where the cancel often lands after
// the header read). Then Close during the wait, and Start again.
func TestCancelledWaitKeepsTheFrame(t *testing.T) {
	path, frames := record(t, 3, 10, sensors.GREY)
	// 1 fps: frame 1 is due a second after frame 0, so the three cut
	// waits below (60 ms and what the test takes between them) end before
	// it is due even on a loaded machine or under qemu.
	s, _ := startReplay(t, Options{Name: "rp", Path: path, FPS: 1}, 2, 64*48)
	f := next(t, s) // the first frame is due at once
	f.Slot.Release()
	for range 3 { // each time the header of frame 1 is read, then the wait is cut short
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := s.Next(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next with a 20 ms deadline at 1 fps: %v, want the deadline", err)
		}
	}
	f = next(t, s)
	if f.Seq != 1 || !bytes.Equal(f.Slot.Bytes()[:f.BytesUsed], frames[1]) {
		t.Fatalf("after cancelled waits: frame seq %d, %d bytes; want frame 1 as recorded", f.Seq, f.BytesUsed)
	}
	f.Slot.Release()
}

// appendRecord appends a raw record with the given delta (bypassing the
// Recorder, which only writes gaps it measured).
func appendRecord(t testing.TB, path string, delta int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var h [recordSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(data)))
	binary.LittleEndian.PutUint64(h[8:], uint64(delta))
	if _, err := f.Write(append(h[:], data...)); err != nil {
		t.Fatal(err)
	}
}

// TestLongRecordedGapsArePacing: a recording may pause for an hour, or
// (damaged) for INT64_MAX ns. Next waits for it as recorded, Pacing says
// so all the while (a watchdog must not call it stuck), nothing overflows,
// and Close ends the wait.
func TestLongRecordedGapsArePacing(t *testing.T) {
	for _, delta := range []int64{int64(time.Hour), math.MaxInt64} {
		path, frames := record(t, 2, 10, sensors.GREY)
		appendRecord(t, path, delta, frames[0])
		s, _ := startReplay(t, Options{Name: "rp", Path: path}, 2, 64*48)
		for range 2 {
			next(t, s).Slot.Release()
		}
		if s.Pacing() {
			t.Fatal("Pacing between frames")
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.Next(context.Background())
			done <- err
		}()
		deadline := time.Now().Add(waitLimit)
		for !s.Pacing() {
			if time.Now().After(deadline) {
				t.Fatal("Next never said it waits for the recorded gap")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("delta %d: Next returned early: %v", delta, err)
		default:
		}
		if !s.Pacing() {
			t.Fatalf("delta %d: Pacing false while Next waits", delta)
		}
		s.Close()
		if err := <-done; !errors.Is(err, sensors.ErrClosed) {
			t.Fatalf("delta %d: Next after Close: %v", delta, err)
		}
		if s.Pacing() {
			t.Fatal("Pacing after Close")
		}
	}
}

// TestReplacedRecording: a looping recording overwritten in place with
// another recording is an error at the rewind (its frames would not be
// what Format says), and a Start on frames larger than the pool's slots
// is refused with sensors.ErrFormat instead of failing every Next.
func TestReplacedRecording(t *testing.T) {
	path, _ := record(t, 3, 10, sensors.GREY)
	s, _ := startReplay(t, Options{Name: "rp", Path: path, FreeRun: true, Loop: true}, 2, 64*48)
	for range 3 {
		next(t, s).Slot.Release()
	}
	// In place: the same inode, as cp or an editor writes it.
	other, _ := record(t, 1, 10, sensors.YUYV) // shorter than what was read: the next Next rewinds
	b := readFile(t, other)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "replaced while it was replayed") {
		t.Fatalf("Next after the recording was replaced: %v", err)
	}
	s.Close()
	if err := s.Start(context.Background(), sensorstest.NewHeapPool(2, 64*48)); !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "do not fit the slots of 3072 bytes") {
		t.Fatalf("Start on frames larger than the slots: %v", err)
	}
	pool := sensorstest.NewHeapPool(2, 64*48*2)
	if err := s.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if f := next(t, s); f.Format.Pixel != sensors.YUYV {
		t.Fatalf("after a restart: %v", f.Format)
	} else {
		f.Slot.Release()
	}
}
