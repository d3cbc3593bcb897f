//go:build !cgo || !linux

package umem

import "fmt"

// loadDriver reports that this build has no CUDA support: the driver is
// bound through cgo, and this binary was built without it.
func loadDriver() (driver, error) {
	return nil, fmt.Errorf("%w: this edged binary was built without cgo (CGO_ENABLED=0), which CUDA support needs", ErrNoCUDA)
}
