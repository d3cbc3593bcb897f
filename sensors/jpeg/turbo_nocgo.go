//go:build !cgo || !linux

package jpeg

import (
	"fmt"
	"image"
)

type turbo struct{ path string }

func loadTurbo(string) (*turbo, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoLibrary, errNoCgo)
}

func (*turbo) decode([]byte, []byte, int) (int, int, error) { return 0, 0, ErrNoLibrary }
func (*turbo) close()                                       {}

type turboEnc struct{ path string }

func loadTurboEncoder(string) (*turboEnc, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoLibrary, errNoCgo)
}

func (*turboEnc) encode(dst []byte, _ *image.RGBA, _ int) ([]byte, error) { return dst, ErrNoLibrary }
func (*turboEnc) close()                                                  {}
