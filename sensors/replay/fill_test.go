package replay

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/edged-dev/edged/sensors"
)

// writeLarge records n random frames large enough for the parallel fill
// (1280x720 YUYV, 1.8 MB) and returns the file and the frames.
func writeLarge(t *testing.T, n int) (string, [][]byte) {
	t.Helper()
	f := sensors.Format{Width: 1280, Height: 720, Pixel: sensors.YUYV}
	path := filepath.Join(t.TempDir(), "large.edgedraw")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewRecorder(out, f)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var frames [][]byte
	for i := 0; i < n; i++ {
		b := make([]byte, f.FrameSize())
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if err := rec.WriteFrame(b, int64(i)*1e6, 0); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return path, frames
}

// Large frames are read by several goroutines at once, byte for byte, also
// after a loop back to the start; a frame allocates nothing.
func TestParallelFill(t *testing.T) {
	path, frames := writeLarge(t, 3)
	s, _ := startReplay(t, Options{Name: "big", Path: path, FreeRun: true, Loop: true}, 2, len(frames[0]))
	if s.fr.fill == nil {
		t.Fatal("no parallel filler for 1.8 MB frames")
	}
	for i := 0; i < 7; i++ {
		f := next(t, s)
		if !bytes.Equal(f.Data(), frames[i%3]) {
			t.Fatalf("frame %d differs", i)
		}
		f.Slot.Release()
	}
	allocs := testing.AllocsPerRun(20, func() {
		f, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		f.Slot.Release()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per frame", allocs)
	}
}

// A file cut inside a large frame is reported as corrupt, not read short.
func TestParallelFillTruncated(t *testing.T) {
	path, frames := writeLarge(t, 2)
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-int64(len(frames[1])/2)); err != nil {
		t.Fatal(err)
	}
	s, _ := startReplay(t, Options{Name: "big", Path: path, FreeRun: true}, 2, len(frames[0]))
	f := next(t, s)
	f.Slot.Release()
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated frame: %v, want ErrCorrupt", err)
	}
}

// BenchmarkFill reads a 1080p YUYV frame (4 MB, page cache) from a
// recording with one ReadAt (the baseline) and with the parallel filler.
func BenchmarkFill(b *testing.B) {
	f := sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}
	path := filepath.Join(b.TempDir(), "b.edgedraw")
	out, _ := os.Create(path)
	rec, _ := NewRecorder(out, f)
	buf := make([]byte, f.FrameSize())
	r := rand.New(rand.NewPCG(1, 1))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	rec.WriteFrame(buf, 0, 0)
	rec.Flush()
	out.Close()
	file, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	for _, w := range []int{0, fillWorkers()} {
		b.Run(map[bool]string{true: "one-read", false: "parallel"}[w == 0], func(b *testing.B) {
			fl := newFiller(w)
			defer fl.close()
			b.SetBytes(int64(len(buf)))
			for i := 0; i < b.N; i++ {
				if err := fl.read(file, buf, headerSize+recordSize); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
