//go:build cgo && linux

package cuda

import (
	"errors"
	"testing"
)

type launchArgs struct {
	blob [64]uint64
	off  [40]int32
	err  error
}

var heapLaunchArgs = &launchArgs{}

// TestLaunchArgsBesideGoPointers: the kernel arguments live in a struct
// that also holds Go pointers (umem.Args keeps an error). Passing them to
// C as a bare unsafe.Pointer made cgo's pointer check inspect the whole
// struct and panic ("argument of cgo function has Go pointer to unpinned
// Go pointer"): every kernel launch on the GPU machine failed so after the
// binding moved here. Launch takes slices, which cgo checks element by
// element. 33 parameters make the C side refuse before it touches the
// driver, so this runs without a GPU (it panicked before the fix).
func TestLaunchArgsBesideGoPointers(t *testing.T) {
	a := heapLaunchArgs // on the heap: cgo does not check a stack variable
	a.err = errors.New("a Go pointer beside the arguments")
	var d Driver
	dims := [6]uint32{1, 1, 1, 1, 1, 1}
	if r := d.Launch(0, 0, &dims, 0, 0, a.blob[:], a.off[:], 33); r != 1 {
		t.Fatalf("Launch with 33 parameters: %v, want CUDA_ERROR_INVALID_VALUE", r)
	}
	if r := d.Launch(0, 0, &dims, 0, 0, a.blob[:], a.off[:], 41); r != 1 {
		t.Fatalf("Launch with more parameters than offsets: %v, want CUDA_ERROR_INVALID_VALUE", r)
	}
}
