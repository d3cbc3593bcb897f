//go:build amd64 || arm64

package v4l2

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// device is the syscall boundary of a V4L2 node. The real one wraps a
// file descriptor; tests substitute a fake that scripts ioctl replies.
type device interface {
	// ioctl issues one V4L2 request; arg points at the request's struct.
	ioctl(req uint, arg unsafe.Pointer) error
	// mmap maps an MMAP buffer at the offset QUERYBUF reported.
	mmap(offset int64, length int) ([]byte, error)
	munmap(b []byte) error
	// fd is what poll(2) waits on: readable when a buffer can be
	// dequeued, POLLERR/POLLHUP when the device is gone.
	fd() int
	close() error
}

type fileDevice struct{ f int }

// openFileDevice opens a V4L2 node non-blocking.
func openFileDevice(path string) (device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not a character device", ErrNotCapture, path)
	}
	return &fileDevice{f: fd}, nil
}

func (d *fileDevice) ioctl(req uint, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d.f), uintptr(req), uintptr(arg))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

func (d *fileDevice) mmap(offset int64, length int) ([]byte, error) {
	return unix.Mmap(d.f, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func (d *fileDevice) munmap(b []byte) error { return unix.Munmap(b) }
func (d *fileDevice) fd() int               { return d.f }
func (d *fileDevice) close() error          { return unix.Close(d.f) }

// Accessors for the unions the generated structs carry as byte arrays.
// Both supported ABIs (amd64, arm64) are little-endian LP64.

func (f *format) pix() *pixFormat { return (*pixFormat)(unsafe.Pointer(&f.Fmt[0])) }

func (p *streamParm) capture() *captureParm { return (*captureParm)(unsafe.Pointer(&p.Parm[0])) }

func (b *buffer) offset() uint32 { return binary.LittleEndian.Uint32(b.M[:4]) }

func (b *buffer) setUserptr(p uintptr) { binary.LittleEndian.PutUint64(b.M[:], uint64(p)) }

func (b *buffer) userptr() uintptr { return uintptr(binary.LittleEndian.Uint64(b.M[:])) }

func (f *frmSizeEnum) stepwise() *frmSizeStepwise {
	return (*frmSizeStepwise)(unsafe.Pointer(&f.Discrete))
}

func (f *frmIvalEnum) stepwise() *frmIvalStepwise {
	return (*frmIvalStepwise)(unsafe.Pointer(&f.Discrete))
}

func cstr(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
