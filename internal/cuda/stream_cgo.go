//go:build cgo && linux

package cuda

import (
	"fmt"
	"unsafe"
)

// Stream is a CUDA stream of its own on a device's primary context (the
// context umem's frame memory lives in): what a video decoder (NVDEC, the
// Jetson's decoder engine) copies its pictures into frame slots on. Its
// errors name the call that failed; the caller wraps them in its own
// sentinel.
type Stream struct {
	drv      *Driver
	dev      int
	ctx, str uintptr
	// Name is the device's name (cuDeviceGetName), "" when the driver
	// did not say.
	Name string
}

// OpenStream loads the driver, retains device ordinal's primary context
// and makes a non-blocking stream on it; Close releases both.
func OpenStream(ordinal int) (*Stream, error) {
	drv, err := Load()
	if err != nil {
		return nil, err
	}
	if r := drv.Init(); r != Success {
		return nil, fmt.Errorf("cuInit: %w", r)
	}
	n, r := drv.DeviceCount()
	if r != Success || ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("CUDA device %d: the driver sees %d (%v)", ordinal, n, r)
	}
	dev, r := drv.DeviceGet(ordinal)
	if r != Success {
		return nil, fmt.Errorf("cuDeviceGet(%d): %w", ordinal, r)
	}
	name, _ := drv.DeviceName(dev)
	ctx, r := drv.PrimaryCtxRetain(dev)
	if r != Success {
		return nil, fmt.Errorf("cuDevicePrimaryCtxRetain(%d): %w", ordinal, r)
	}
	str, r := drv.StreamCreate(ctx, 1) // CU_STREAM_NON_BLOCKING
	if r != Success {
		drv.PrimaryCtxRelease(dev)
		return nil, fmt.Errorf("cuStreamCreate: %w", r)
	}
	return &Stream{drv: drv, dev: dev, ctx: ctx, str: str, Name: name}, nil
}

// Handle is the CUstream, for calls made elsewhere (a decoder's own
// library takes it).
func (s *Stream) Handle() uintptr { return s.str }

// Bind makes the stream's context current on the calling thread (which
// the caller keeps locked to its goroutine while it works on the device).
func (s *Stream) Bind() error {
	if r := s.drv.CtxSetCurrent(s.ctx); r != Success {
		return fmt.Errorf("cuCtxSetCurrent: %w", r)
	}
	return nil
}

// AttachMem attaches managed memory at p to the stream (host false: only
// this stream's work touches it) or to the host (host true), as
// cuStreamAttachMemAsync does.
func (s *Stream) AttachMem(p uintptr, host bool) error {
	flags := uint32(4) // CU_MEM_ATTACH_SINGLE
	if host {
		flags = 2 // CU_MEM_ATTACH_HOST
	}
	if r := s.drv.StreamAttachMem(s.ctx, s.str, p, flags); r != Success {
		return fmt.Errorf("cuStreamAttachMemAsync: %w", r)
	}
	return nil
}

// Copy2D copies height rows of width bytes from device memory at src
// (pitch bytes apart) to dst, or to host when dst is 0 (dpitch bytes
// apart), on the stream; Sync waits for it.
func (s *Stream) Copy2D(dst uintptr, host unsafe.Pointer, dpitch int, src uintptr, pitch, width, height int) error {
	if r := s.drv.Memcpy2D(s.ctx, dst, host, dpitch, src, pitch, width, height, s.str); r != Success {
		return fmt.Errorf("cuMemcpy2DAsync: %w", r)
	}
	return nil
}

// Sync waits until the work queued on the stream is done.
func (s *Stream) Sync() error {
	if r := s.drv.StreamSynchronize(s.ctx, s.str); r != Success {
		return fmt.Errorf("cuStreamSynchronize: %w", r)
	}
	return nil
}

// Close destroys the stream and releases the primary context; a second
// Close does nothing.
func (s *Stream) Close() {
	if s.str != 0 {
		s.drv.StreamDestroy(s.ctx, s.str)
		s.drv.PrimaryCtxRelease(s.dev)
		s.str = 0
	}
}
