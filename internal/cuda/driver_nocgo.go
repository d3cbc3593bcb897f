//go:build !cgo || !linux

package cuda

import (
	"errors"
	"unsafe"
)

// Load reports that this build has no CUDA support: the driver is bound
// through cgo, and this binary was built without it.
func Load() (*Driver, error) {
	return nil, errors.New("this edged binary was built without cgo (CGO_ENABLED=0), which CUDA support needs")
}

// Driver is the loaded CUDA driver; a build without cgo never has one.
type Driver struct{}

// Proc returns nil: there is no driver.
func (*Driver) Proc(string) unsafe.Pointer { return nil }
