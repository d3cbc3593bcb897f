//go:build !cgo || !linux

package tensorrt

import (
	"fmt"

	"github.com/edged-dev/edged/trt"
)

// Probe reports which libnvinfer this machine has. Without cgo on Linux it
// cannot look, and says so.
func Probe(library string) (Library, error) {
	return Library{}, fmt.Errorf("%w: tensorrt: edged was built without cgo, so it cannot load libnvinfer; "+
		"build it with CGO_ENABLED=1 and -tags tensorrt", trt.ErrBackend)
}
