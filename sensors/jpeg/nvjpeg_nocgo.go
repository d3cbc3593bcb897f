//go:build !cgo || !linux

package jpeg

import "fmt"

type nvDevice struct {
	version string
	hw      bool
	engines int
}

func loadNVJPEG(string) (string, error) {
	return "", fmt.Errorf("%w: %w", ErrNoNVJPEG, errNoCgo)
}

func openNVDevice(int, bool) (*nvDevice, error) { return nil, ErrNoNVJPEG }
func (*nvDevice) header([]byte) (int, int, int) { return 0, 0, 1 }
func (*nvDevice) devicePtr([]byte) uint64       { return 0 }
func (*nvDevice) run([]*nvRequest) int          { return 0 }
func (*nvDevice) close()                        {}
func (*nvDevice) allocManaged(int) []byte       { return nil }
func (*nvDevice) freeManaged([]byte)            {}

type nvStage struct{ d *nvDevice }

func (*nvStage) header([]byte) (int, int, int) { return 0, 0, 1 }
func (*nvStage) put([]byte) error              { return ErrNoNVJPEG }
func (*nvStage) device(int) (uint64, error)    { return 0, ErrNoNVJPEG }
func (*nvStage) copyOut([]byte) error          { return ErrNoNVJPEG }
func (*nvStage) free()                         {}
