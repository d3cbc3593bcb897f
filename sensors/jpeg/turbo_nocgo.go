//go:build !cgo || !linux

package jpeg

import "fmt"

type turbo struct{ path string }

func loadTurbo(string) (*turbo, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoLibrary, errNoCgo)
}

func (*turbo) decode([]byte, []byte, int) (int, int, error) { return 0, 0, ErrNoLibrary }
func (*turbo) close()                                       {}
