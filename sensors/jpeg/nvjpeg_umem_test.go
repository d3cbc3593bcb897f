package jpeg_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/umem"
)

// TestNVJPEGIntoUmemSlots: umem and nvJPEG in one process share the one
// CUDA driver binding (internal/cuda): frame memory umem allocates
// (managed, mapped pinned) is what nvJPEG decodes into directly, as a
// camera's MJPEG frames reach their slots in the daemon, and the image is
// the copied one byte for byte. Skips without CUDA and nvJPEG, unless
// EDGED_REQUIRE_NVJPEG is set.
func TestNVJPEGIntoUmemSlots(t *testing.T) {
	d := nvjpegWith(t, jpeg.GPU{Direct: true})
	src := encode(t, scene(1280, 720), 85)
	want := make([]byte, 1280*720*3)
	if _, _, err := nvjpeg(t).Decode(want, src, 1); err != nil {
		t.Fatal(err)
	}
	for _, st := range []umem.Strategy{umem.StrategyManaged, umem.StrategyMapped} {
		p, err := umem.Open(umem.Options{Strategy: st})
		if err != nil {
			if errors.Is(err, umem.ErrNoCUDA) && os.Getenv("EDGED_REQUIRE_NVJPEG") == "" {
				t.Skipf("umem: %v", err)
			}
			t.Fatalf("umem.Open(%s): %v", st, err)
		}
		b, err := p.Alloc.Alloc(len(want))
		if err != nil {
			p.Close()
			t.Fatalf("%s: %v", st, err)
		}
		host, err := b.Host()
		if err != nil {
			t.Fatalf("%s: Host: %v", st, err)
		}
		if w, h, err := d.Decode(host, src, 1); err != nil || w != 1280 || h != 720 {
			t.Errorf("%s: decode into the umem buffer: %dx%d, %v", st, w, h, err)
		} else if !bytes.Equal(host[:len(want)], want) {
			t.Errorf("%s: the decode into the umem buffer differs from the copied one", st)
		}
		if err := b.Release(); err != nil {
			t.Errorf("%s: Release: %v", st, err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s: Close: %v", st, err)
		}
	}
}
