//go:build !cgo || !linux

package nvdec

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/sensors/h26x"
)

var errNoCgo = errors.New("NVDEC is not in this build: edged was built without cgo (CGO_ENABLED=0) or not for Linux, and libnvcuvid is loaded through cgo")

// Load reports that this build cannot load libnvcuvid.
func Load(string) (string, error) { return "", fmt.Errorf("%w: %w", ErrNoNVDEC, errNoCgo) }

// Open reports that this build has no NVDEC.
func Open(h26x.Codec, Options) (*Decoder, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoNVDEC, errNoCgo)
}

// Probe reports that this build has no NVDEC.
func Probe(string, int) (string, Caps, Caps, error) {
	return "", Caps{}, Caps{}, fmt.Errorf("%w: %w", ErrNoNVDEC, errNoCgo)
}
