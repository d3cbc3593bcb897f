package umem

import (
	"errors"
	"strings"
	"testing"

	"github.com/edged-dev/edged/internal/cuda"
)

func TestResultNamesAndText(t *testing.T) {
	cases := []struct {
		r          Result
		name, text string
	}{
		{0, "CUDA_SUCCESS", "no error"},
		{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
		{34, "CUDA_ERROR_STUB_LIBRARY", "stub library"},
		{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device"},
		{201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
		{218, "CUDA_ERROR_INVALID_PTX", "PTX JIT compilation failed"},
		{222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "unsupported toolchain"},
		{600, "CUDA_ERROR_NOT_READY", "device not ready"},
		{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "illegal memory access"},
		{801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
		{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
		{12345, "CUresult(12345)", "unknown CUDA status"},
	}
	for _, c := range cases {
		if got := c.r.Name(); got != c.name {
			t.Errorf("Result(%d).Name() = %q, want %q", int32(c.r), got, c.name)
		}
		if got := c.r.Error(); !strings.Contains(got, c.name) || !strings.Contains(got, c.text) {
			t.Errorf("Result(%d).Error() = %q, want the name %q and text %q", int32(c.r), got, c.name, c.text)
		}
	}
}

func TestResultIsMapping(t *testing.T) {
	sentinels := []error{ErrNoCUDA, ErrOutOfMemory, ErrContextLost, ErrNotSupported}
	want := map[Result]error{
		2: ErrOutOfMemory, 34: ErrNoCUDA, 46: ErrNoCUDA, 100: ErrNoCUDA, 102: ErrNoCUDA, 802: ErrNoCUDA, 803: ErrNoCUDA, 804: ErrNoCUDA,
		214: ErrContextLost, 220: ErrContextLost, 226: ErrContextLost, 700: ErrContextLost, 702: ErrContextLost, 710: ErrContextLost, 714: ErrContextLost,
		715: ErrContextLost, 716: ErrContextLost, 717: ErrContextLost, 718: ErrContextLost, 719: ErrContextLost,
		911: ErrContextLost, 801: ErrNotSupported,
	}
	for r := Result(0); r <= 1000; r++ {
		if !cuda.Result(r).Known() {
			continue
		}
		for _, s := range sentinels {
			// Through the wrapping every driver call uses.
			err := call("cuSomething", r)
			if r == 0 {
				if err != nil {
					t.Fatalf("call(success) = %v", err)
				}
				continue
			}
			if got := errors.Is(err, s); got != (want[r] == s) {
				t.Errorf("errors.Is(%s, %v) = %v, want %v", r.Name(), s, got, !got)
			}
			if !errors.Is(err, r) {
				t.Errorf("errors.Is(call error, %s) = false", r.Name())
			}
		}
	}
	var r Result
	if err := call("cuMemAlloc_v2", 2); !errors.As(err, &r) || r != 2 || !strings.Contains(err.Error(), "cuMemAlloc_v2") {
		t.Errorf("call error %v does not unwrap to its Result or lacks the function name", err)
	}
}

func TestGPUActiveErrorMatchesBoth(t *testing.T) {
	if !errors.Is(errGPUActive, ErrGPUActive) || !errors.Is(errGPUActive, ErrOwnedByStream) || errors.Is(errGPUActive, ErrReleased) {
		t.Error("errGPUActive must match ErrGPUActive and ErrOwnedByStream only")
	}
}
