package trt

import (
	"math"
	"testing"
	"unsafe"

	"github.com/edged-dev/edged/umem"
)

// float32ToHalf is the reference conversion the other way (round to
// nearest even), used to check HalfToFloat32 over every half value.
func float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN: keep the top payload bits, stay NaN
		return sign | 0x7c00 | uint16(mant>>13) | 1
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		return sign // tests only convert values that are exact halves
	}
	return sign | uint16(exp)<<10 | uint16(mant>>13)
}

func TestHalfToFloat32EveryValue(t *testing.T) {
	for h := range 1 << 16 {
		f := HalfToFloat32(uint16(h))
		exp, mant := h>>10&0x1f, h&0x3ff
		switch {
		case exp == 0x1f && mant != 0:
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: %v, want NaN", h, f)
			}
		case exp == 0x1f:
			if !math.IsInf(float64(f), map[bool]int{true: -1, false: 1}[h&0x8000 != 0]) {
				t.Fatalf("%#04x: %v, want infinity", h, f)
			}
		case exp == 0:
			want := float64(mant) * math.Pow(2, -24)
			if h&0x8000 != 0 {
				want = -want
			}
			if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("%#04x: %v, want %v", h, f, want)
			}
		default:
			if back := float32ToHalf(f); back != uint16(h) {
				t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
			}
			want := (1 + float64(mant)/1024) * math.Pow(2, float64(exp-15))
			if h&0x8000 != 0 {
				want = -want
			}
			if float64(f) != want {
				t.Fatalf("%#04x: %v, want %v", h, f, want)
			}
		}
	}
	if HalfToFloat32(0x3c00) != 1 || HalfToFloat32(0xc000) != -2 || HalfToFloat32(0x7bff) != 65504 || HalfToFloat32(0x0001) != 5.960464477539063e-08 {
		t.Error("known values")
	}
}

func TestFloat16TableMatches(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]float32, len(src))
	Float16ToFloat32Into(dst, src)
	for i, h := range src {
		if math.Float32bits(dst[i]) != math.Float32bits(HalfToFloat32(h)) {
			t.Fatalf("%#04x: table %v, direct %v", h, dst[i], HalfToFloat32(h))
		}
	}
}

// tensorOf makes a host tensor of type d holding raw.
func tensorOf(t testing.TB, d DataType, shape []int64, raw []byte) *Tensor {
	t.Helper()
	b, err := umem.NewHost().Alloc(max(len(raw), 1))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := b.Host()
	copy(h, raw)
	t.Cleanup(func() { b.Release() })
	return &Tensor{TensorSpec: TensorSpec{Name: "t", Type: d, Shape: shape}, Buf: b}
}

func rawOf[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

func TestReadFloat32EveryType(t *testing.T) {
	want := []float32{0, 1, -2, 100, -128, 127}
	for _, tc := range []struct {
		d    DataType
		raw  []byte
		want []float32
	}{
		{Float32, rawOf(want), want},
		{Float16, rawOf([]uint16{0, 0x3c00, 0xc000, 0x5640, 0xd800, 0x57f0}), want},
		{Int8, rawOf([]int8{0, 1, -2, 100, -128, 127}), want},
		{Uint8, []byte{0, 1, 254, 100, 128, 255}, []float32{0, 1, 254, 100, 128, 255}},
		{Int32, rawOf([]int32{0, 1, -2, 100, -128, 1 << 24}), []float32{0, 1, -2, 100, -128, 1 << 24}},
		{Int64, rawOf([]int64{0, 1, -2, 100, -128, -(1 << 40)}), []float32{0, 1, -2, 100, -128, -(1 << 40)}},
		{Bool, []byte{0, 1, 0, 7, 0, 1}, []float32{0, 1, 0, 1, 0, 1}},
	} {
		ts := tensorOf(t, tc.d, []int64{1, 6}, tc.raw)
		dst := make([]float32, 8)
		got := ts.ReadFloat32(dst)
		if len(got) != 6 {
			t.Fatalf("%s: %v", tc.d, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: element %d = %v, want %v", tc.d, i, got[i], tc.want[i])
			}
		}
		if ts.ReadFloat32(dst[:5]) != nil {
			t.Errorf("%s: a short dst was filled", tc.d)
		}
		if n := testing.AllocsPerRun(20, func() { ts.ReadFloat32(dst) }); n != 0 {
			t.Errorf("%s: %v allocations", tc.d, n)
		}
	}
	unknown := tensorOf(t, DataType(42), []int64{1}, []byte{1, 2, 3, 4})
	if unknown.ReadFloat32(make([]float32, 4)) != nil {
		t.Error("an unknown type was converted")
	}
}

func BenchmarkFloat16Table(b *testing.B) {
	src := make([]uint16, 84*8400)
	for i := range src {
		src[i] = uint16(i*7) & 0x7bff
	}
	dst := make([]float32, len(src))
	b.SetBytes(int64(len(src) * 2))
	for b.Loop() {
		Float16ToFloat32Into(dst, src)
	}
}

func BenchmarkFloat16Arithmetic(b *testing.B) {
	src := make([]uint16, 84*8400)
	for i := range src {
		src[i] = uint16(i*7) & 0x7bff
	}
	dst := make([]float32, len(src))
	b.SetBytes(int64(len(src) * 2))
	for b.Loop() {
		for i, h := range src {
			dst[i] = HalfToFloat32(h)
		}
	}
}
