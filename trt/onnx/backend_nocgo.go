//go:build !cgo || !linux

package onnx

import (
	"context"
	"fmt"
	"runtime"

	"github.com/edged-dev/edged/trt"
)

// New fails: this build has no cgo on Linux, which ONNX Runtime needs.
func New(Options) (*Backend, error) {
	return nil, fmt.Errorf("%w: onnx: this edged was built without cgo for linux (GOOS=%s); "+
		"ONNX Runtime needs a build with CGO_ENABLED=1 on Linux (make build)", trt.ErrBackend, runtime.GOOS)
}

// Load fails as New does.
func (*Backend) Load(context.Context, []byte, trt.LoadOptions) (trt.Engine, error) {
	_, err := New(Options{})
	return nil, err
}
