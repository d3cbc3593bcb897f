package trt_test

import (
	"math"
	"slices"
	"testing"

	"github.com/edged-dev/edged/trt"
)

// TestImageShapeResolve: the pipeline's image size fills a dynamic image
// input whatever its layout or channel count, for the named input or the
// first, and leaves everything else alone.
func TestImageShapeResolve(t *testing.T) {
	s := &trt.ImageShape{Height: 480, Width: 640}
	for _, c := range []struct {
		name  string
		img   *trt.ImageShape
		input string
		first bool
		dims  []int64
		want  []int64
	}{
		{"nchw dynamic size", s, "images", true, []int64{1, 3, -1, -1}, []int64{1, 3, 480, 640}},
		{"dynamic batch too", s, "images", true, []int64{-1, 3, -1, -1}, []int64{1, 3, 480, 640}},
		{"grey nchw", s, "x", true, []int64{1, 1, -1, -1}, []int64{1, 1, 480, 640}},
		{"nhwc from fixed channels", s, "x", true, []int64{1, -1, -1, 3}, []int64{1, 480, 640, 3}},
		{"grey nhwc", s, "x", true, []int64{-1, -1, -1, 1}, []int64{1, 480, 640, 1}},
		{"all dynamic: nchw, 3 channels", s, "x", true, []int64{-1, -1, -1, -1}, []int64{1, 3, 480, 640}},
		{"all dynamic, layout nhwc", &trt.ImageShape{Height: 480, Width: 640, Layout: "nhwc"}, "x", true, []int64{-1, -1, -1, -1}, []int64{1, 480, 640, 3}},
		{"layout nchw wins over the guess", &trt.ImageShape{Height: 2, Width: 2, Layout: "nchw"}, "x", true, []int64{1, -1, -1, 3}, []int64{1, 3, 2, 2}},
		{"only batch dynamic: the size is the pipeline's (the backend rejects a mismatch)", s, "x", true, []int64{-1, 3, 224, 224}, []int64{1, 3, 480, 640}},
		{"named input", &trt.ImageShape{Input: "img", Height: 8, Width: 8}, "img", false, []int64{1, 3, -1, -1}, []int64{1, 3, 8, 8}},
		{"another named input", &trt.ImageShape{Input: "img", Height: 8, Width: 8}, "mask", true, []int64{1, 3, -1, -1}, nil},
		{"not the first input", s, "x", false, []int64{1, 3, -1, -1}, nil},
		{"static", s, "x", true, []int64{1, 3, 224, 224}, nil},
		{"not 4-D", s, "x", true, []int64{1, -1}, nil},
		{"nil", nil, "x", true, []int64{1, 3, -1, -1}, nil},
	} {
		if got := c.img.Resolve(c.input, c.first, c.dims); !slices.Equal(got, c.want) {
			t.Errorf("%s: Resolve(%q, %v, %v) = %v, want %v", c.name, c.input, c.first, c.dims, got, c.want)
		}
	}
}

// TestTensorSizeSaturates: a shape whose product does not fit in int64
// (three dimensions of 2^31) is the largest size, not a wrapped, negative
// or small one: no allocation of it can succeed.
func TestTensorSizeSaturates(t *testing.T) {
	s := trt.TensorSpec{Name: "x", Type: trt.Float32, Shape: []int64{1 << 31, 1 << 31, 1 << 31}}
	if n, b := s.Elements(), s.Bytes(); n != math.MaxInt64 || b != math.MaxInt64 {
		t.Errorf("Elements %d, Bytes %d", n, b)
	}
	s.Shape = []int64{1 << 31, 1 << 31} // 2^62 elements, 2^64 bytes
	if n, b := s.Elements(), s.Bytes(); n != 1<<62 || b != math.MaxInt64 {
		t.Errorf("Elements %d, Bytes %d", n, b)
	}
	if b := (trt.TensorSpec{Type: trt.Float32, Shape: []int64{1, 3, 0, 4}}).Bytes(); b != 0 {
		t.Errorf("a zero dimension: %d bytes", b)
	}
}
