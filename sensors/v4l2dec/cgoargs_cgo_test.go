//go:build cgo && linux

package v4l2dec

import (
	"errors"
	"syscall"
	"testing"
	"unsafe"

	"github.com/edged-dev/edged/sensors/h26x"
)

// TestCgoArgumentsPassThePointerCheck: the Decoder's ioctls, and the
// surface calls, go through the cgo binding's real call sites with the
// Decoder's own argument buffers (before the libraries are loaded every
// wrapper answers ENOSYS), so cgo's pointer check, which runs before the
// call, is exercised without a board: an argument inside an object that
// holds Go pointers panics there (it did in the NVDEC binding on the GPU
// machine).
func TestCgoArgumentsPassThePointerCheck(t *testing.T) {
	d, f, _, err := openFake(h26x.H264, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.dev, d.surf = &v4l2lib{}, &nvbuf{res: map[uintptr]unsafe.Pointer{}}
	nosys := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.ENOSYS) {
			t.Errorf("%s: %v, want ENOSYS", what, err)
		}
	}
	nosys("S_EXT_CTRLS", d.setControl("frame input", cidDisableCompleteFrameInput, 0))
	_, err = d.reqbufs(bufTypeCapture, 2)
	nosys("REQBUFS", err)
	nosys("STREAMON", d.streamOn(bufTypeCapture))
	nosys("QBUF", d.requeue(0))
	nosys("DQEVENT", d.events())
	nosys("G_FMT", d.setupCapture())
	if _, err := d.dev.mmap(3, 0, 4096); !errors.Is(err, syscall.ENOSYS) {
		t.Errorf("mmap: %v", err)
	}
	if _, err := d.surf.fromFd(100); err == nil {
		t.Error("NvBufSurfaceFromFd without the library")
	}
	if _, _, _, err := d.surf.cuda(1); err == nil {
		t.Error("the CUDA mapping without the library")
	}
	d.dev, d.surf = f, f
	d.Close()
}
