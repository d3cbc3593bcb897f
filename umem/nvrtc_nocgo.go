//go:build !cgo || !linux

package umem

import "fmt"

func loadNVRTC(string) (nvrtcLib, error) {
	return nil, fmt.Errorf("%w: this edged binary was built without cgo", ErrNoNVRTC)
}
