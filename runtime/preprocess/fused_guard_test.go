//go:build linux

package preprocess

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/sensors"
)

// guarded returns n bytes lying between two inaccessible pages: flush
// against the one after them (end) or the one before them: a read past
// either end of the frame faults instead of reading a neighbour.
func guarded(t *testing.T, n int, end bool) []byte {
	t.Helper()
	page := unix.Getpagesize()
	data := (n + page - 1) / page * page
	m, err := unix.Mmap(-1, 0, data+2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	if err := unix.Mprotect(m[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(m[page+data:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if end {
		return m[page+data-n : page+data : page+data]
	}
	return m[page : page+n : page+n]
}

// TestVectorReadsStayInFrame runs the vector kernels on frames of random
// sizes and strides whose first or last byte touches an inaccessible page,
// so a tap word placed outside its line would crash the test, and checks
// each against the portable pass.
func TestVectorReadsStayInFrame(t *testing.T) {
	if !haveSIMD {
		t.Skip("no vector kernel on this machine")
	}
	r := rand.New(rand.NewPCG(11, 12))
	ran := 0
	for i := range 300 {
		pf := yuvFormats[i%len(yuvFormats)]
		w, h := 8+r.IntN(300), 4+r.IntN(160)
		f := sensors.Format{Width: w, Height: h, Pixel: pf}
		if w%2 == 1 || r.IntN(3) == 0 {
			f.Stride = pf.PackedLine(w+1) + r.IntN(9)
		}
		if pf == sensors.NV12 && f.Stride == 0 && w%2 == 1 {
			continue
		}
		o := variants[i%4] // 3 channels: float32/16, NCHW/NHWC, BGR
		o.Out.W, o.Out.H, o.Threads = 8+r.IntN(w), 1+r.IntN(h/2), 1
		if i%8 == 1 { // the area pass's row kernel
			o.Filter = Area
		}
		if i%4 == 3 { // rows shared: the horizontal kernel and the row cache
			o.Out.W, o.Out.H = 8+r.IntN(2*w), 1+r.IntN(2*h)
		}
		if i%2 == 0 {
			o.Resize = Letterbox
		}
		src := guarded(t, f.FrameSize(), i%3 != 0)
		copy(src, noise(f, uint64(i)))
		vec, port, blocks, _ := bothKernels(t, o, src, f)
		if blocks == 0 {
			continue
		}
		ran++
		compareOutputs(t, fmt.Sprintf("%s %s vector against portable", f, variantName(o)), o, vec, port, 0.02)
	}
	if ran < 150 {
		t.Fatalf("the vector kernel ran on %d of 300 frames, want at least 150", ran)
	}
	t.Logf("the vector kernel ran on %d frames", ran)
}
