//go:build !cgo || !linux

package onnx

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

func TestStub(t *testing.T) {
	_, err := New(Options{})
	if !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), "CGO_ENABLED=1") {
		t.Errorf("New = %v, want trt.ErrBackend saying how to build", err)
	}
	var b Backend
	if _, err := b.Load(context.Background(), nil, trt.LoadOptions{}); !errors.Is(err, trt.ErrBackend) {
		t.Errorf("Load = %v, want trt.ErrBackend", err)
	}
	if b.Name() != BackendName {
		t.Errorf("Name = %q", b.Name())
	}
}
