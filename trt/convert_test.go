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

// TestFloat16IntoMatches: the vector conversion (where the CPU has it) and
// the table give the exact conversion's bits for every half value but
// NaN (a NaN either way), at every length (the vector part and the rest).
func TestFloat16IntoMatches(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	vector := haveF16C
	defer func() { haveF16C = vector }()
	for _, f16c := range []bool{false, vector} {
		haveF16C = f16c
		for _, n := range []int{len(src), 1, 7, 8, 9, 15, 17, 1000} {
			dst := make([]float32, n+1)
			dst[n] = 42
			Float16ToFloat32Into(dst[:n], src[len(src)-n:])
			for i, h := range src[len(src)-n:] {
				want := HalfToFloat32(h)
				if want != want && dst[i] != dst[i] {
					continue // NaN stays NaN (F16C quiets a signalling one)
				}
				if math.Float32bits(dst[i]) != math.Float32bits(want) {
					t.Fatalf("F16C %v, n %d: %#04x: %v, exact %v", f16c, n, h, dst[i], HalfToFloat32(h))
				}
			}
			if dst[n] != 42 {
				t.Fatalf("F16C %v: wrote past %d values", f16c, n)
			}
		}
	}
	t.Logf("F16C: %v", vector)
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

// halfScores is a [1, 84, 8400] detector output as float16: boxes in
// pixels, class scores mostly small.
func halfScores() []uint16 {
	src := make([]uint16, 84*8400)
	for i := range src {
		v := float32(i%997) / 997 * 0.05
		if i < 4*8400 {
			v = float32(i%640) + 0.5
		}
		src[i] = float32ToHalf(v)
	}
	return src
}

// BenchmarkFloat16 converts a YOLOv8n-sized output per op: with F16C
// where the CPU has it, with the table, and with the exact conversion
// one value at a time (the baseline).
func BenchmarkFloat16(b *testing.B) {
	src := halfScores()
	dst := make([]float32, len(src))
	vector := haveF16C
	defer func() { haveF16C = vector }()
	for _, bc := range []struct {
		name string
		f16c bool
		f    func()
	}{
		{"f16c", true, func() { Float16ToFloat32Into(dst, src) }},
		{"table", false, func() { Float16ToFloat32Into(dst, src) }},
		{"exact", false, func() {
			for i, h := range src {
				dst[i] = HalfToFloat32(h)
			}
		}},
	} {
		if bc.f16c && !vector {
			continue
		}
		b.Run(bc.name, func(b *testing.B) {
			haveF16C = bc.f16c
			b.SetBytes(int64(len(src) * 2))
			for b.Loop() {
				bc.f()
			}
		})
	}
}
