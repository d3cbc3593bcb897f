//go:build cgo && linux

package nvdec

import (
	"errors"
	"testing"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors/h26x"
)

// TestCgoArgumentsPassThePointerCheck: every call the Decoder makes into
// libnvcuvid goes through the cgo binding's real call sites with the
// Decoder's own argument buffers, here before the library is loaded (each
// C wrapper then answers CUDA_ERROR_NOT_INITIALIZED without calling
// anything). cgo's pointer check runs before the call: the structures
// were fields of the Decoder, which holds Go pointers, and every decode on
// the GPU machine panicked ("argument of cgo function has Go pointer to
// unpinned Go pointer") in cuvidGetDecoderCaps; this failed the same way
// without a GPU.
func TestCgoArgumentsPassThePointerCheck(t *testing.T) {
	if loaded != "" {
		t.Skip("libnvcuvid is loaded in this process: the wrappers would call it")
	}
	d, _, _, err := openFake(h26x.H264, Options{Params: []byte{0, 0, 0, 1, 0x67}})
	if err != nil {
		t.Fatal(err)
	}
	d.lib = cuvid{}
	notInit := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, cuda.Result(3)) {
			t.Errorf("%s: %v, want CUDA_ERROR_NOT_INITIALIZED", what, err)
		}
	}
	g := geometry{codedW: 176, codedH: 112, display: [4]int32{0, 0, 170, 100}, w: 170, h: 100, tw: 170, th: 100}
	notInit("caps", d.fits(codecH264, g))
	notInit("create", d.createDecoder(codecH264, g, 8))
	d.dec = 1
	if d.reconfigure(g) {
		t.Error("reconfigure without a library succeeded")
	}
	notInit("parse", d.Send([]byte{0, 0, 0, 1, 0x65, 0x88}, 1))
	d.cur, d.have, d.geo = shown{idx: 0}, true, g
	_, err = d.Write(make([]byte, 170*100*3/2))
	notInit("map", err)
	d.dec = 0
	d.parser = 0
	d.Close()
}
