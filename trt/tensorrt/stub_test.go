//go:build !tensorrt || !cgo || !linux

package tensorrt

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

func TestNewWithoutTensorRT(t *testing.T) {
	b, err := New(Options{})
	if b != nil || !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), "built without TensorRT") ||
		!strings.Contains(err.Error(), "-tags tensorrt") {
		t.Fatalf("New = %v, %v", b, err)
	}
	var s Backend
	if _, err := s.Load(context.Background(), nil, trt.LoadOptions{}); !errors.Is(err, trt.ErrBackend) {
		t.Errorf("Load: %v", err)
	}
	if !HeaderVersion().IsZero() {
		t.Errorf("HeaderVersion = %v", HeaderVersion())
	}
}
