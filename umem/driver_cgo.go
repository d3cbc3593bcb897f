//go:build cgo && linux

package umem

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
)

var (
	loadOnce sync.Once
	loadErr  error
	theDrv   *cudaDriver
)

// loadDriver loads the CUDA driver through internal/cuda (edged's one
// binding of libcuda) and calls cuInit, once per process.
func loadDriver() (driver, error) {
	loadOnce.Do(func() {
		d, err := cuda.Load()
		if err != nil {
			loadErr = fmt.Errorf("%w: %w", ErrNoCUDA, err)
			return
		}
		if r := Result(d.Init()); r != resultSuccess {
			loadErr = fmt.Errorf("%w: cuInit: %w", ErrNoCUDA, r)
			return
		}
		theDrv = &cudaDriver{d}
	})
	if loadErr != nil {
		return nil, loadErr
	}
	return theDrv, nil
}

// cudaDriver is umem's driver over internal/cuda: each status becomes an
// error naming the driver function, matching umem's sentinels.
type cudaDriver struct{ d *cuda.Driver }

func (c *cudaDriver) version() (int, error) {
	v, r := c.d.Version()
	return v, call("cuDriverGetVersion", Result(r))
}

func (c *cudaDriver) deviceCount() (int, error) {
	v, r := c.d.DeviceCount()
	return v, call("cuDeviceGetCount", Result(r))
}

func (c *cudaDriver) deviceGet(ordinal int) (int, error) {
	v, r := c.d.DeviceGet(ordinal)
	return v, call("cuDeviceGet", Result(r))
}

func (c *cudaDriver) deviceName(dev int) (string, error) {
	v, r := c.d.DeviceName(dev)
	return v, call("cuDeviceGetName", Result(r))
}

func (c *cudaDriver) deviceAttr(dev, attr int) (int, error) {
	v, r := c.d.DeviceAttr(dev, attr)
	return v, call("cuDeviceGetAttribute", Result(r))
}

func (c *cudaDriver) deviceTotalMem(dev int) (uint64, error) {
	v, r := c.d.DeviceTotalMem(dev)
	return v, call("cuDeviceTotalMem_v2", Result(r))
}

func (c *cudaDriver) primaryCtxRetain(dev int) (uintptr, error) {
	v, r := c.d.PrimaryCtxRetain(dev)
	return v, call("cuDevicePrimaryCtxRetain", Result(r))
}

func (c *cudaDriver) primaryCtxRelease(dev int) error {
	return call("cuDevicePrimaryCtxRelease_v2", Result(c.d.PrimaryCtxRelease(dev)))
}

func (c *cudaDriver) primaryCtxSetFlags(dev int, flags uint32) error {
	return call("cuDevicePrimaryCtxSetFlags_v2", Result(c.d.PrimaryCtxSetFlags(dev, flags)))
}

func (c *cudaDriver) ctxSetCurrent(ctx uintptr) error {
	return call("cuCtxSetCurrent", Result(c.d.CtxSetCurrent(ctx)))
}

func (c *cudaDriver) ctxGetCurrent() (uintptr, error) {
	v, r := c.d.CtxGetCurrent()
	return v, call("cuCtxGetCurrent", Result(r))
}

func (c *cudaDriver) memGetInfo(ctx uintptr) (uint64, uint64, error) {
	f, t, r := c.d.MemGetInfo(ctx)
	return f, t, call("cuMemGetInfo_v2", Result(r))
}

func (c *cudaDriver) memAlloc(ctx uintptr, n int) (uintptr, error) {
	p, r := c.d.MemAlloc(ctx, n)
	return p, call("cuMemAlloc_v2", Result(r))
}

func (c *cudaDriver) memAllocManaged(ctx uintptr, n int, flags uint32) (uintptr, unsafe.Pointer, error) {
	p, h, r := c.d.MemAllocManaged(ctx, n, flags)
	return p, h, call("cuMemAllocManaged", Result(r))
}

func (c *cudaDriver) memFree(ctx uintptr, dptr uintptr) error {
	return call("cuMemFree_v2", Result(c.d.MemFree(ctx, dptr)))
}

func (c *cudaDriver) memHostAlloc(ctx uintptr, n int, flags uint32) (unsafe.Pointer, uintptr, error) {
	h, p, r := c.d.MemHostAlloc(ctx, n, flags)
	return h, p, call("cuMemHostAlloc", Result(r))
}

func (c *cudaDriver) memFreeHost(ctx uintptr, p unsafe.Pointer) error {
	return call("cuMemFreeHost", Result(c.d.MemFreeHost(ctx, p)))
}

func (c *cudaDriver) streamCreate(ctx uintptr, flags uint32) (uintptr, error) {
	s, r := c.d.StreamCreate(ctx, flags)
	return s, call("cuStreamCreate", Result(r))
}

func (c *cudaDriver) streamDestroy(ctx, s uintptr) error {
	return call("cuStreamDestroy_v2", Result(c.d.StreamDestroy(ctx, s)))
}

func (c *cudaDriver) streamSynchronize(ctx, s uintptr) error {
	return call("cuStreamSynchronize", Result(c.d.StreamSynchronize(ctx, s)))
}

func (c *cudaDriver) streamQuery(ctx, s uintptr) error {
	r := Result(c.d.StreamQuery(ctx, s))
	if r == resultNotReady {
		return resultNotReady // the common case: no allocation
	}
	return call("cuStreamQuery", r)
}

func (c *cudaDriver) streamAttachMem(ctx, s, dptr uintptr, flags uint32) error {
	return call("cuStreamAttachMemAsync", Result(c.d.StreamAttachMem(ctx, s, dptr, flags)))
}

func (c *cudaDriver) canPrefetch() bool { return c.d.CanPrefetch() }

func (c *cudaDriver) prefetch(ctx, dptr uintptr, n int, dst int, s uintptr) error {
	return call("cuMemPrefetchAsync", Result(c.d.Prefetch(ctx, dptr, n, dst, s)))
}

func (c *cudaDriver) memcpyHtoD(ctx, dst uintptr, src unsafe.Pointer, n int, s uintptr) error {
	return call("cuMemcpyHtoDAsync_v2", Result(c.d.MemcpyHtoD(ctx, dst, src, n, s)))
}

func (c *cudaDriver) memcpyDtoH(ctx uintptr, dst unsafe.Pointer, src uintptr, n int, s uintptr) error {
	return call("cuMemcpyDtoHAsync_v2", Result(c.d.MemcpyDtoH(ctx, dst, src, n, s)))
}

func (c *cudaDriver) memcpyDtoD(ctx, dst, src uintptr, n int, s uintptr) error {
	return call("cuMemcpyDtoDAsync_v2", Result(c.d.MemcpyDtoD(ctx, dst, src, n, s)))
}

func (c *cudaDriver) eventCreate(ctx uintptr, flags uint32) (uintptr, error) {
	e, r := c.d.EventCreate(ctx, flags)
	return e, call("cuEventCreate", Result(r))
}

func (c *cudaDriver) eventDestroy(ctx, e uintptr) error {
	return call("cuEventDestroy_v2", Result(c.d.EventDestroy(ctx, e)))
}

func (c *cudaDriver) eventRecord(ctx, e, s uintptr) error {
	return call("cuEventRecord", Result(c.d.EventRecord(ctx, e, s)))
}

func (c *cudaDriver) eventSynchronize(ctx, e uintptr) error {
	return call("cuEventSynchronize", Result(c.d.EventSynchronize(ctx, e)))
}

func (c *cudaDriver) eventQuery(ctx, e uintptr) error {
	r := Result(c.d.EventQuery(ctx, e))
	if r == resultNotReady {
		return resultNotReady
	}
	return call("cuEventQuery", r)
}

func (c *cudaDriver) eventElapsed(ctx, start, end uintptr) (float32, error) {
	ms, r := c.d.EventElapsed(ctx, start, end)
	return ms, call("cuEventElapsedTime", Result(r))
}

func (c *cudaDriver) moduleLoad(ctx uintptr, image []byte) (uintptr, string, error) {
	m, log, r := c.d.ModuleLoad(ctx, image)
	return m, log, call("cuModuleLoadDataEx", Result(r))
}

func (c *cudaDriver) moduleUnload(ctx, mod uintptr) error {
	return call("cuModuleUnload", Result(c.d.ModuleUnload(ctx, mod)))
}

func (c *cudaDriver) moduleFunction(ctx, mod uintptr, name string) (uintptr, error) {
	f, r := c.d.ModuleFunction(ctx, mod, name)
	return f, call("cuModuleGetFunction", Result(r))
}

func (c *cudaDriver) launch(ctx, fn uintptr, grid, block Dim3, sharedMem uint32, s uintptr, a *Args) error {
	dims := [6]uint32{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z}
	return call("cuLaunchKernel", Result(c.d.Launch(ctx, fn, &dims, sharedMem, s, a.blob[:], a.off[:], a.n)))
}

func (c *cudaDriver) errorText(r Result) (string, bool) { return c.d.ErrorText(cuda.Result(r)) }
