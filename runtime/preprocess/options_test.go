package preprocess

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// halfValues lists every finite non-negative float16 value in increasing
// order (bits 0x0000..0x7bff), from the IEEE definition rather than
// HalfToFloat.
func halfValues() []float64 {
	v := make([]float64, 0x7c00)
	for h := range v {
		e, m := h>>10, float64(h&0x3ff)
		if e == 0 {
			v[h] = m * math.Pow(2, -24)
		} else {
			v[h] = (1 + m/1024) * math.Pow(2, float64(e-15))
		}
	}
	return v
}

// bruteHalf rounds f to float16 by searching the table of values: the
// nearest one, ties to the even bit pattern, Inf at or beyond 65520 (half
// way to the next power of two).
func bruteHalf(vals []float64, f float32) uint16 {
	sign := uint16(0)
	x := float64(f)
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if math.IsNaN(x) {
		return sign | 0x7e00 // quiet NaN, sign kept
	}
	if x >= 65520 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(vals, x) // vals[i-1] < x ≤ vals[i]
	if i == len(vals) {
		return sign | uint16(i-1)
	}
	if vals[i] == x || i == 0 {
		return sign | uint16(i)
	}
	lo, hi := x-vals[i-1], vals[i]-x
	switch {
	case lo < hi:
		return sign | uint16(i-1)
	case hi < lo:
		return sign | uint16(i)
	case (i-1)%2 == 0:
		return sign | uint16(i-1)
	}
	return sign | uint16(i)
}

func TestHalfMatchesBruteForce(t *testing.T) {
	vals := halfValues()
	var in []float32
	// Every float16 value, its neighbours and the midpoints to the next.
	for h := 0; h < len(vals); h++ {
		v := float32(vals[h])
		in = append(in, v, math.Nextafter32(v, 0), math.Nextafter32(v, 1e9))
		if h+1 < len(vals) {
			mid := float32((vals[h] + vals[h+1]) / 2) // exact in float32
			in = append(in, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		in = append(in, math.Float32frombits(r.Uint32()))
	}
	in = append(in, 65504, 65519.996, 65520, 65536, 1e-8, 2.9802322e-08, float32(math.Inf(1)))
	for _, f := range in {
		for _, v := range []float32{f, -f} {
			if got, want := Half(v), bruteHalf(vals, v); got != want {
				t.Fatalf("Half(%g [%#08x]) = %#04x, want %#04x", v, math.Float32bits(v), got, want)
			}
		}
	}
}

func TestHalfToFloat(t *testing.T) {
	vals := halfValues()
	for h := 0; h < 0x10000; h++ {
		got := HalfToFloat(uint16(h))
		e, m := h>>10&0x1f, h&0x3ff
		var want float64
		switch {
		case e == 0x1f && m == 0:
			want = math.Inf(1)
		case e == 0x1f:
			if !math.IsNaN(float64(got)) {
				t.Fatalf("HalfToFloat(%#04x) = %v, want NaN", h, got)
			}
			continue
		default:
			want = vals[h&0x7fff]
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(got) != want || math.Signbit(float64(got)) != (h&0x8000 != 0) {
			t.Fatalf("HalfToFloat(%#04x) = %v, want %v", h, got, want)
		}
		if e != 0x1f && Half(got) != uint16(h) {
			t.Fatalf("Half(HalfToFloat(%#04x)) = %#04x", h, Half(got))
		}
	}
}

func TestColorCoeffs(t *testing.T) {
	near := func(name string, got float32, want float64) {
		t.Helper()
		if math.Abs(float64(got)-want) > 2e-6 {
			t.Errorf("%s = %.7f, want %.6f", name, got, want)
		}
	}
	// The BT.601 limited-range constants of the old implementation.
	k := ColorCoeffs(BT601, false)
	near("601 YGain", k.YGain, 1.164383)
	near("601 RV", k.RV, 1.596027)
	near("601 GU", k.GU, 0.391762)
	near("601 GV", k.GV, 0.812968)
	near("601 BU", k.BU, 2.017232)
	if k.YOff != 16 || ColorCoeffs("", false) != k {
		t.Errorf("601: %+v", k)
	}
	// BT.709 limited range (ITU-R BT.709-6 inverse).
	k = ColorCoeffs(BT709, false)
	near("709 YGain", k.YGain, 1.164383)
	near("709 RV", k.RV, 1.792741)
	near("709 GU", k.GU, 0.213249)
	near("709 GV", k.GV, 0.532909)
	near("709 BU", k.BU, 2.112402)
	// Full range (JPEG): Y as is, the bare matrix.
	k = ColorCoeffs(BT601, true)
	if k.YOff != 0 || k.YGain != 1 {
		t.Errorf("601 full: %+v", k)
	}
	near("601 full RV", k.RV, 1.402)
	near("601 full GU", k.GU, 0.344136)
	near("601 full GV", k.GV, 0.714136)
	near("601 full BU", k.BU, 1.772)
	// Grey round-trips and the clamp.
	for _, full := range []bool{false, true} {
		for _, m := range []string{BT601, BT709} {
			k := ColorCoeffs(m, full)
			y := uint8(126)
			if !full {
				y = 16 + 110
			}
			r, g, b := k.RGB(y, 128, 128)
			want := float32(126)
			if !full {
				want = 110 * 255.0 / 219
			}
			if math.Abs(float64(r-want)) > 1e-4 || r != g || g != b {
				t.Errorf("%s full=%v grey: %v %v %v, want %v", m, full, r, g, b, want)
			}
			if r, g, b := k.RGB(255, 255, 255); r != 255 || b != 255 || g <= 0 {
				t.Errorf("%s full=%v clamp high: %v %v %v", m, full, r, g, b)
			}
			if r, g, b := k.RGB(0, 0, 0); r != 0 || b != 0 || g < 0 {
				t.Errorf("%s full=%v clamp low: %v %v %v", m, full, r, g, b)
			}
		}
	}
}

func TestTapsBilinear(t *testing.T) {
	// 8 → 4: centres at 0.5, 2.5, 4.5, 6.5.
	got := Taps(Bilinear, 8, 4)
	want := [][]Tap{{{0, 0.5}, {1, 0.5}}, {{2, 0.5}, {3, 0.5}}, {{4, 0.5}, {5, 0.5}}, {{6, 0.5}, {7, 0.5}}}
	if !tapsEqual(got, want) {
		t.Errorf("8→4: %v", got)
	}
	// 3 → 2: centres at 0.25 and 1.75.
	got = Taps(Bilinear, 3, 2)
	want = [][]Tap{{{0, 0.75}, {1, 0.25}}, {{1, 0.25}, {2, 0.75}}}
	if !tapsEqual(got, want) {
		t.Errorf("3→2: %v", got)
	}
	// 2 → 8 (r = 1/4): centre (i+0.5)/4 − 0.5 clamped to [0, 1].
	got = Taps(Bilinear, 2, 8)
	want = [][]Tap{{{0, 1}}, {{0, 1}}, {{0, 0.875}, {1, 0.125}}, {{0, 0.625}, {1, 0.375}},
		{{0, 0.375}, {1, 0.625}}, {{0, 0.125}, {1, 0.875}}, {{1, 1}}, {{1, 1}}}
	if !tapsEqual(got, want) {
		t.Errorf("2→8: %v", got)
	}
	// Area where the image grows is bilinear.
	if !tapsEqual(Taps(Area, 2, 8), want) {
		t.Errorf("area 2→8: %v", Taps(Area, 2, 8))
	}
}

func TestTapsArea(t *testing.T) {
	// 5 → 2 (r = 2.5): [0, 2.5) and [2.5, 5).
	got := Taps(Area, 5, 2)
	want := [][]Tap{{{0, 0.4}, {1, 0.4}, {2, 0.2}}, {{2, 0.2}, {3, 0.4}, {4, 0.4}}}
	if !tapsEqual(got, want) {
		t.Errorf("5→2: %v", got)
	}
	// Against numerical integration of the footprint, for ratios that are
	// and are not whole.
	for _, c := range [][2]int{{1920, 224}, {1080, 224}, {642, 100}, {9, 4}, {7, 7}} {
		n, m := c[0], c[1]
		taps := Taps(Area, n, m)
		for i, ti := range taps {
			w := make(map[int]float64)
			const steps = 4096
			r := float64(n) / float64(m)
			for s := 0; s < steps; s++ {
				x := (float64(i) + (float64(s)+0.5)/steps) * r
				w[int(x)] += 1.0 / steps
			}
			sum := 0.0
			for _, tp := range ti {
				sum += tp.Weight
				if math.Abs(tp.Weight-w[tp.Src]) > 2.0/steps*r {
					t.Errorf("%d→%d column %d: pixel %d weight %v, integrated %v", n, m, i, tp.Src, tp.Weight, w[tp.Src])
				}
				delete(w, tp.Src)
			}
			for s, v := range w {
				if v > 2.0/steps*r {
					t.Errorf("%d→%d column %d: pixel %d (weight %v) missing", n, m, i, s, v)
				}
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("%d→%d column %d: weights sum to %v", n, m, i, sum)
			}
		}
	}
}

func tapsEqual(a, b [][]Tap) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k := range a[i] {
			if a[i][k].Src != b[i][k].Src || math.Abs(a[i][k].Weight-b[i][k].Weight) > 1e-12 {
				return false
			}
		}
	}
	return true
}
