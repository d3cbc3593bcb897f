//go:build cgo && linux

package umem

import (
	"golang.org/x/sys/unix"
)

func gettid() int { return unix.Gettid() }

func nvrtcPath() string {
	if nvrtcLoaded == nil {
		return ""
	}
	return nvrtcLoaded.path
}
