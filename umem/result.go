package umem

import (
	"errors"

	"github.com/edged-dev/edged/internal/cuda"
)

// More errors; CUDA status codes map onto them through [Result.Is].
var (
	// ErrGPUActive is returned for host access to a globally attached
	// managed buffer while a stream of the device has unfinished work, on a
	// device with concurrentManagedAccess = 0 or in strict mode. It also
	// matches ErrOwnedByStream.
	ErrGPUActive = errors.New("umem: the GPU is running work and this managed buffer is visible to it")
	// ErrOutOfMemory matches CUDA_ERROR_OUT_OF_MEMORY.
	ErrOutOfMemory = errors.New("umem: out of GPU memory")
	// ErrContextLost matches the sticky CUDA errors (illegal address,
	// launch failure, ECC, ...): the context is unusable and only a new
	// process recovers.
	ErrContextLost = errors.New("umem: CUDA context is corrupted; restart the process")
	// ErrNotSupported matches CUDA_ERROR_NOT_SUPPORTED and operations the
	// device or driver cannot do (prefetch on concurrentManagedAccess = 0).
	ErrNotSupported = errors.New("umem: not supported by this device or driver")
	// ErrNoNVRTC is returned when no NVRTC library can be loaded.
	ErrNoNVRTC = errors.New("umem: NVRTC (CUDA run-time compiler) not available")
	// ErrClosed is returned by a closed device, stream, event, module or worker.
	ErrClosed = errors.New("umem: closed")
)

// Result is a CUDA driver API status code (CUresult). It implements error:
// the text names the CUDA constant and says what it means, with or without
// the driver loaded.
type Result int32

// Status codes umem branches on.
const (
	resultSuccess     Result = 0
	resultNotReady    Result = 600
	resultInvalidVal  Result = 1
	resultOutOfMemory Result = 2
	resultNoDevice    Result = 100
)

// Name is the CUDA constant name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
func (r Result) Name() string { return cuda.Result(r).Name() }

// Text describes the code: the driver's own text when the driver is
// loaded, else the built-in one (internal/cuda's table of every CUresult).
func (r Result) Text() string { return cuda.Result(r).Text() }

func (r Result) Error() string { return cuda.Result(r).Error() }

// Is maps CUDA codes onto the package sentinels, so callers can write
// errors.Is(err, umem.ErrOutOfMemory) whatever call failed.
func (r Result) Is(target error) bool {
	switch target {
	case ErrNoCUDA:
		switch r {
		case 34, 46, 100, 102, 802, 803, 804:
			return true
		}
	case ErrOutOfMemory:
		return r == resultOutOfMemory
	case ErrContextLost:
		switch r {
		case 214, 220, 226, 700, 702, 710, 714, 715, 716, 717, 718, 719, 911:
			return true
		}
	case ErrNotSupported:
		return r == 801
	}
	return false
}

// check turns a status into an error: nil for CUDA_SUCCESS.
func check(r Result) error {
	if r == resultSuccess {
		return nil
	}
	return r
}

// callError names the failed driver function.
type callError struct {
	fn  string
	res Result
}

func (e *callError) Error() string { return "umem: " + e.fn + ": " + e.res.Error() }
func (e *callError) Unwrap() error { return e.res }

// call wraps a non-success status with the driver function's name.
func call(fn string, r Result) error {
	if r == resultSuccess {
		return nil
	}
	return &callError{fn: fn, res: r}
}
