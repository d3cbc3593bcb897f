//go:build !cgo || !linux

package avcodec

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

var errNoCgo = errors.New("this edged was built without cgo (CGO_ENABLED=0) or not for Linux: it cannot load libavcodec")

// Load reports that libavcodec cannot be loaded by this build.
func Load(string) (file, ver string, err error) {
	return "", "", fmt.Errorf("%w: %w", ErrNoLibrary, errNoCgo)
}

// Decoder is never made by this build.
type Decoder struct{}

// Open reports that libavcodec cannot be loaded by this build.
func Open(h26x.Codec, Options) (*Decoder, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoLibrary, errNoCgo)
}

func (*Decoder) Describe() string          { return "" }
func (*Decoder) Send([]byte, uint64) error { return ErrNoLibrary }
func (*Decoder) Receive() (uint64, sensors.Format, bool, error) {
	return 0, sensors.Format{}, false, ErrNoLibrary
}
func (*Decoder) Write([]byte) (bool, error) { return false, ErrNoLibrary }
func (*Decoder) Drain() error               { return ErrNoLibrary }
func (*Decoder) Close() error               { return nil }
