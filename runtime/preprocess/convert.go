package preprocess

import "math"

// Fixed point of the CPU path. A converted source pixel is RGB in
// [0, 255·2^fracBits]; a horizontally filtered value carries another
// wBits (the weights of one destination column sum to 1<<wBits), so a
// filtered row holds RGB·2^(fracBits+wBits) ≤ 255·2^22 in int32.
const (
	fracBits = 8
	wBits    = 14
	wOne     = 1 << wBits
	maxFix   = 255 << fracBits
	// rowScale converts a filtered row back to [0, 255].
	rowScale = 1.0 / (1 << (fracBits + wBits))
)

// yuvTable converts YUV to fixed-point RGB with five lookups and a
// branch-free clamp (min/max compile to conditional moves), so the cost of
// a pixel does not depend on its value.
type yuvTable struct {
	y [256]int32    // (Y − YOff)·YGain
	u [256][2]int32 // −GU·d, BU·d
	v [256][2]int32 // RV·e, −GV·e
}

func newYUVTable(k Coeffs) *yuvTable {
	fix := func(v float64) int32 { return int32(math.Round(v * (1 << fracBits))) }
	t := new(yuvTable)
	for i := range 256 {
		c := float64(i) - 128
		t.y[i] = fix((float64(i) - float64(k.YOff)) * float64(k.YGain))
		t.u[i] = [2]int32{fix(-float64(k.GU) * c), fix(float64(k.BU) * c)}
		t.v[i] = [2]int32{fix(float64(k.RV) * c), fix(-float64(k.GV) * c)}
	}
	return t
}

// rgb converts one pixel.
func (t *yuvTable) rgb(y, u, v byte) (r, g, b int32) {
	c, cu, cv := t.y[y], &t.u[u], &t.v[v]
	return clampFix(c + cv[0]), clampFix(c + cu[0] + cv[1]), clampFix(c + cu[1])
}

func clampFix(x int32) int32 { return min(max(x, 0), maxFix) }

// pxOff locates one source pixel's three bytes in its line: Y, U, V (U
// and V in the chroma line for NV12), or R, G, B, or the grey value at a.
type pxOff struct{ a, b, c int32 }

// xtap is a destination column of a 2-tap (bilinear) horizontal pass: the
// two source pixels and the weight of the second in 1/wOne.
type xtap struct {
	p0, p1 pxOff
	w1     int32
}

// The horizontal passes filter one source line into out (RGB interleaved,
// one triple per destination column). h2* read only the two pixels each
// column needs; row* convert a whole line for the K-tap (area) pass.

func h2YUV(yl, cl []byte, xt []xtap, t *yuvTable, out []int32) {
	out = out[:3*len(xt)]
	for i := range xt {
		p := &xt[i]
		r0, g0, b0 := t.rgb(yl[p.p0.a], cl[p.p0.b], cl[p.p0.c])
		r1, g1, b1 := t.rgb(yl[p.p1.a], cl[p.p1.b], cl[p.p1.c])
		w := p.w1
		o := out[3*i : 3*i+3 : 3*i+3]
		o[0] = r0<<wBits + (r1-r0)*w
		o[1] = g0<<wBits + (g1-g0)*w
		o[2] = b0<<wBits + (b1-b0)*w
	}
}

func h2RGB(l []byte, xt []xtap, out []int32) {
	out = out[:3*len(xt)]
	for i := range xt {
		p := &xt[i]
		r0, g0, b0 := int32(l[p.p0.a])<<fracBits, int32(l[p.p0.b])<<fracBits, int32(l[p.p0.c])<<fracBits
		r1, g1, b1 := int32(l[p.p1.a])<<fracBits, int32(l[p.p1.b])<<fracBits, int32(l[p.p1.c])<<fracBits
		w := p.w1
		o := out[3*i : 3*i+3 : 3*i+3]
		o[0] = r0<<wBits + (r1-r0)*w
		o[1] = g0<<wBits + (g1-g0)*w
		o[2] = b0<<wBits + (b1-b0)*w
	}
}

func h2Grey(l []byte, xt []xtap, out []int32) {
	out = out[:3*len(xt)]
	for i := range xt {
		p := &xt[i]
		v0, v1 := int32(l[p.p0.a])<<fracBits, int32(l[p.p1.a])<<fracBits
		v := v0<<wBits + (v1-v0)*p.w1
		o := out[3*i : 3*i+3 : 3*i+3]
		o[0], o[1], o[2] = v, v, v
	}
}

// The row* functions convert a whole line of n pixels for the area pass
// into running sums: s[3(x+1)+k] = s[3x+k] + channel k of pixel x, s[0..2]
// = 0 (int32 wrap-around is harmless: only differences of nearby sums are
// used). 4:2:2 and 4:2:0 chroma terms are computed once per pixel pair.
// The YUV ones start at pixel x0 (even), continuing the sums s[:3x0+3]
// the vector kernel wrote (0: from the start).

// rowYUYV converts a packed 4:2:2 line (Y0 U Y1 V).
func rowYUYV(l []byte, n int, t *yuvTable, s []int32, x0 int) {
	s = s[:3*(n+1)]
	s[0], s[1], s[2] = 0, 0, 0 // (already so when the kernel wrote s[:3x0+3])
	x := x0
	r, g, b := s[3*x], s[3*x+1], s[3*x+2]
	for ; x+1 < n; x += 2 {
		q := l[2*x : 2*x+4 : 2*x+4]
		cu, cv := &t.u[q[1]], &t.v[q[3]]
		rv, guv, bu := cv[0], cu[0]+cv[1], cu[1]
		c0, c1 := t.y[q[0]], t.y[q[2]]
		o := s[3*x+3 : 3*x+9 : 3*x+9]
		r += clampFix(c0 + rv)
		g += clampFix(c0 + guv)
		b += clampFix(c0 + bu)
		o[0], o[1], o[2] = r, g, b
		r += clampFix(c1 + rv)
		g += clampFix(c1 + guv)
		b += clampFix(c1 + bu)
		o[3], o[4], o[5] = r, g, b
	}
	if x < n { // odd width: the last pixel's pair lies within the stride
		q := l[2*x : 2*x+4 : 2*x+4]
		pr, pg, pb := t.rgb(q[0], q[1], q[3])
		s[3*x+3], s[3*x+4], s[3*x+5] = r+pr, g+pg, b+pb
	}
}

// rowUYVY converts a packed 4:2:2 line (U Y0 V Y1).
func rowUYVY(l []byte, n int, t *yuvTable, s []int32, x0 int) {
	s = s[:3*(n+1)]
	s[0], s[1], s[2] = 0, 0, 0 // (already so when the kernel wrote s[:3x0+3])
	x := x0
	r, g, b := s[3*x], s[3*x+1], s[3*x+2]
	for ; x+1 < n; x += 2 {
		q := l[2*x : 2*x+4 : 2*x+4]
		cu, cv := &t.u[q[0]], &t.v[q[2]]
		rv, guv, bu := cv[0], cu[0]+cv[1], cu[1]
		c0, c1 := t.y[q[1]], t.y[q[3]]
		o := s[3*x+3 : 3*x+9 : 3*x+9]
		r += clampFix(c0 + rv)
		g += clampFix(c0 + guv)
		b += clampFix(c0 + bu)
		o[0], o[1], o[2] = r, g, b
		r += clampFix(c1 + rv)
		g += clampFix(c1 + guv)
		b += clampFix(c1 + bu)
		o[3], o[4], o[5] = r, g, b
	}
	if x < n {
		q := l[2*x : 2*x+4 : 2*x+4]
		pr, pg, pb := t.rgb(q[1], q[0], q[2])
		s[3*x+3], s[3*x+4], s[3*x+5] = r+pr, g+pg, b+pb
	}
}

// rowNV12 converts a luma line and its interleaved chroma line.
func rowNV12(yl, cl []byte, n int, t *yuvTable, s []int32, x0 int) {
	s = s[:3*(n+1)]
	s[0], s[1], s[2] = 0, 0, 0 // (already so when the kernel wrote s[:3x0+3])
	x := x0
	r, g, b := s[3*x], s[3*x+1], s[3*x+2]
	for ; x+1 < n; x += 2 {
		y := yl[x : x+2 : x+2]
		c := cl[x : x+2 : x+2]
		cu, cv := &t.u[c[0]], &t.v[c[1]]
		rv, guv, bu := cv[0], cu[0]+cv[1], cu[1]
		c0, c1 := t.y[y[0]], t.y[y[1]]
		o := s[3*x+3 : 3*x+9 : 3*x+9]
		r += clampFix(c0 + rv)
		g += clampFix(c0 + guv)
		b += clampFix(c0 + bu)
		o[0], o[1], o[2] = r, g, b
		r += clampFix(c1 + rv)
		g += clampFix(c1 + guv)
		b += clampFix(c1 + bu)
		o[3], o[4], o[5] = r, g, b
	}
	if x < n {
		c := cl[x : x+2 : x+2]
		pr, pg, pb := t.rgb(yl[x], c[0], c[1])
		s[3*x+3], s[3*x+4], s[3*x+5] = r+pr, g+pg, b+pb
	}
}

// rowRGB converts an RGB24 line, or a BGR24 one.
func rowRGB(l []byte, n int, bgr bool, s []int32) {
	s = s[:3*(n+1)]
	l = l[:3*n]
	ir, ib := 0, 2
	if bgr {
		ir, ib = 2, 0
	}
	var r, g, b int32
	s[0], s[1], s[2] = 0, 0, 0
	for x := 0; x < n; x++ {
		p := l[3*x : 3*x+3 : 3*x+3]
		r += int32(p[ir&3]) << fracBits
		g += int32(p[1]) << fracBits
		b += int32(p[ib&3]) << fracBits
		o := s[3*x+3 : 3*x+6 : 3*x+6]
		o[0], o[1], o[2] = r, g, b
	}
}

// rowGrey converts a GREY line.
func rowGrey(l []byte, n int, s []int32) {
	s = s[:3*(n+1)]
	l = l[:n]
	var v int32
	s[0], s[1], s[2] = 0, 0, 0
	for x, p := range l {
		v += int32(p) << fracBits
		o := s[3*x+3 : 3*x+6 : 3*x+6]
		o[0], o[1], o[2] = v, v, v
	}
}

// areaTap is a destination column of the area horizontal pass: source
// pixels first..last, the first and last weighted by their overlap
// (1/wOne), those between (first+1..midEnd-1) by one weight wMid in
// 1/(wOne<<midBits), so that wide footprints do not pile up rounding
// error; the weights sum to 1 within 1/(2·wOne). midEnd is last, or
// first+1 when first = last.
type areaTap struct {
	first, last, midEnd int32
	wFirst, wLast       int32
	wMid                int64
}

const midBits = 16

// hArea applies area weights to a line of running sums (see rowYUYV): a
// footprint costs the same whatever its width.
func hArea(s []int32, at []areaTap, out []int32) {
	out = out[:3*len(at)]
	for i := range at {
		a := &at[i]
		f := s[3*a.first : 3*a.first+6 : 3*a.first+6] // sums before and after the first pixel
		l := s[3*a.last : 3*a.last+6 : 3*a.last+6]
		m := s[3*a.midEnd : 3*a.midEnd+3 : 3*a.midEnd+3]
		o := out[3*i : 3*i+3 : 3*i+3]
		for k := range 3 {
			mid := int32(int64(m[k]-f[3+k]) * a.wMid >> midBits)
			o[k] = (f[3+k]-f[k])*a.wFirst + mid + (l[3+k]-l[k])*a.wLast
		}
	}
}
