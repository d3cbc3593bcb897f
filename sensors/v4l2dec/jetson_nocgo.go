//go:build !cgo || !linux

package v4l2dec

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/sensors/h26x"
)

var errNoCgo = errors.New("the Jetson decoder is not in this build: edged was built without cgo (CGO_ENABLED=0) or not for Linux, and libv4l2 and NvBufSurface are loaded through cgo")

// Libraries are the files Load opens on a Jetson.
var Libraries = []string{"libv4l2.so.0", "libnvbufsurface.so.1", "libnvbufsurftransform.so.1"}

// Load reports that this build has no Jetson decoder.
func Load() error { return fmt.Errorf("%w: %w", ErrNoDecoder, errNoCgo) }

// Open reports that this build has no Jetson decoder.
func Open(h26x.Codec, Options) (*Decoder, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoDecoder, errNoCgo)
}
