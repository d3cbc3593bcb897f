package jpeg_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/edged-dev/edged/sensors/jpeg"
)

// TestNVJPEGDirect: with GPU.Direct, nvJPEG writes into memory the GPU
// addresses (here CUDA managed memory) itself; the image is the one the
// copy path delivers to host memory, byte for byte.
func TestNVJPEGDirect(t *testing.T) {
	d := nvjpegWith(t, jpeg.GPU{Direct: true})
	src := encode(t, scene(1280, 720), 85)
	want := make([]byte, 1280*720*3)
	if _, _, err := nvjpeg(t).Decode(want, src, 1); err != nil {
		t.Fatal(err)
	}
	m, free := jpeg.AllocManaged(d, len(want))
	if m == nil {
		t.Fatal("no managed memory")
	}
	defer free()
	w, h, err := d.Decode(m, src, 1)
	if err != nil || w != 1280 || h != 720 {
		t.Fatalf("direct decode: %dx%d, %v", w, h, err)
	}
	if !bytes.Equal(m[:len(want)], want) {
		t.Error("the direct decode differs from the copied one")
	}
	if n := testing.AllocsPerRun(20, func() {
		if _, _, err := d.Decode(m, src, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per direct decode, want 0", n)
	}
}

// TestNVJPEGBatched: four cameras decoding at once share one engine, which
// decodes what is pending as one batch (on the JPEG engines where the GPU
// has them). Every frame comes out as the same decoder gives it alone, and
// one camera's corrupt frames fail alone, never a neighbour's.
func TestNVJPEGBatched(t *testing.T) {
	const cams, frames = 4, 60
	var srcs [cams][]byte
	var want [cams][]byte
	solo := nvjpeg(t)
	for c := range cams {
		srcs[c] = encode(t, scene(960+64*c, 540+36*c), 80+c)
		hd, err := solo.Header(srcs[c])
		if err != nil {
			t.Fatal(err)
		}
		want[c] = make([]byte, 3*hd.Width*hd.Height)
		if _, _, err := solo.Decode(want[c], srcs[c], 1); err != nil {
			t.Fatal(err)
		}
	}
	bad := corruptions(t)
	before, _, _ := jpeg.NVJPEGStats(0)
	_, batchesBefore, _ := jpeg.NVJPEGStats(0)
	var wg sync.WaitGroup
	errs := make(chan error, cams*frames)
	for c := range cams {
		d := nvjpeg(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, len(want[c]))
			for i := range frames {
				if c == cams-1 && i%3 == 0 { // this camera sends damage too
					b := bad[i/3%len(bad)]
					if _, _, err := d.Decode(dst, b.data, 1); !errors.Is(err, jpeg.ErrCorrupt) {
						errs <- fmt.Errorf("camera %d frame %d (%s): %v, want ErrCorrupt", c, i, b.name, err)
					}
					continue
				}
				if _, _, err := d.Decode(dst, srcs[c], 1); err != nil {
					errs <- fmt.Errorf("camera %d frame %d: %v", c, i, err)
					continue
				}
				if !bytes.Equal(dst, want[c]) {
					errs <- fmt.Errorf("camera %d frame %d differs from the decode alone", c, i)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	hw, batches, _ := jpeg.NVJPEGStats(0)
	t.Logf("%s: %d frames on the JPEG engines, %d batches of more than one frame", solo.Backend(), hw-before, batches-batchesBefore)
	if batches == batchesBefore {
		t.Error("four cameras decoding at once never shared a batch")
	}
}
