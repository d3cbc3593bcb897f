//go:build linux && (amd64 || arm64)

package v4l2

import (
	"testing"
	"unsafe"
)

// The generated layouts must match the kernel ABI sizes encoded in the
// ioctl numbers (bits 16..29 carry sizeof the argument).
func TestABISizes(t *testing.T) {
	size := func(req uint) uintptr { return uintptr(req>>16) & 0x3fff }
	for _, c := range []struct {
		name string
		req  uint
		got  uintptr
	}{
		{"capability", vidiocQuerycap, unsafe.Sizeof(capability{})},
		{"fmtdesc", vidiocEnumFmt, unsafe.Sizeof(fmtDesc{})},
		{"frmsizeenum", vidiocEnumFramesizes, unsafe.Sizeof(frmSizeEnum{})},
		{"frmivalenum", vidiocEnumFrameintervals, unsafe.Sizeof(frmIvalEnum{})},
		{"format", vidiocSFmt, unsafe.Sizeof(format{})},
		{"streamparm", vidiocSParm, unsafe.Sizeof(streamParm{})},
		{"requestbuffers", vidiocReqbufs, unsafe.Sizeof(requestBuffers{})},
		{"buffer", vidiocDqbuf, unsafe.Sizeof(buffer{})},
	} {
		if want := size(c.req); c.got != want {
			t.Errorf("%s: Go struct is %d bytes, ioctl says %d", c.name, c.got, want)
		}
	}
	if unsafe.Sizeof(pixFormat{}) > 200 || unsafe.Sizeof(captureParm{}) > 200 {
		t.Error("union member larger than its union")
	}
	if unsafe.Offsetof(buffer{}.M) != 64 || unsafe.Sizeof(buffer{}.Timestamp) != 16 {
		t.Errorf("v4l2_buffer: m at %d, timestamp %d bytes; want 64 and 16 on LP64", unsafe.Offsetof(buffer{}.M), unsafe.Sizeof(buffer{}.Timestamp))
	}
}
