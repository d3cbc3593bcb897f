package preprocess

// The vertical passes combine horizontally filtered rows (RGB·2^22,
// interleaved) into one output row and apply the affine. g and bias are
// per RGB channel (already in the output channel's normalisation, or the
// luma weights times it); the row weights carry rowScale.
//
// 3-channel passes write RGB channel k to d[k]; luma passes write d.

// v2RGB blends two rows: d[k][x] = top·c0[k] + bot·c1[k] + bias[k].
func v2RGB(top, bot []int32, c0, c1, bias *[3]float32, d0, d1, d2 []float32) {
	n := len(d0)
	d1, d2 = d1[:n], d2[:n]
	top, bot = top[:3*n], bot[:3*n]
	for x := 0; x < n; x++ {
		t := top[3*x : 3*x+3 : 3*x+3]
		b := bot[3*x : 3*x+3 : 3*x+3]
		d0[x] = float32(t[0])*c0[0] + float32(b[0])*c1[0] + bias[0]
		d1[x] = float32(t[1])*c0[1] + float32(b[1])*c1[1] + bias[1]
		d2[x] = float32(t[2])*c0[2] + float32(b[2])*c1[2] + bias[2]
	}
}

// v2Luma blends two rows into luma.
func v2Luma(top, bot []int32, c0, c1 *[3]float32, bias float32, d []float32) {
	n := len(d)
	top, bot = top[:3*n], bot[:3*n]
	for x := 0; x < n; x++ {
		t := top[3*x : 3*x+3 : 3*x+3]
		b := bot[3*x : 3*x+3 : 3*x+3]
		d[x] = float32(t[0])*c0[0] + float32(t[1])*c0[1] + float32(t[2])*c0[2] +
			float32(b[0])*c1[0] + float32(b[1])*c1[1] + float32(b[2])*c1[2] + bias
	}
}

// vSet starts a K-tap accumulation: acc = h·w.
func vSet(acc []float32, h []int32, w float32) {
	h = h[:len(acc)]
	for i := range acc {
		acc[i] = float32(h[i]) * w
	}
}

// vAdd accumulates acc += h·w.
func vAdd(acc []float32, h []int32, w float32) {
	h = h[:len(acc)]
	for i := range acc {
		acc[i] += float32(h[i]) * w
	}
}

// finRGB writes an accumulated row: d[k][x] = acc·g[k] + bias[k].
func finRGB(acc []float32, g, bias *[3]float32, d0, d1, d2 []float32) {
	n := len(d0)
	d1, d2 = d1[:n], d2[:n]
	acc = acc[:3*n]
	for x := 0; x < n; x++ {
		a := acc[3*x : 3*x+3 : 3*x+3]
		d0[x] = a[0]*g[0] + bias[0]
		d1[x] = a[1]*g[1] + bias[1]
		d2[x] = a[2]*g[2] + bias[2]
	}
}

// finLuma writes an accumulated row as luma.
func finLuma(acc []float32, g *[3]float32, bias float32, d []float32) {
	n := len(d)
	acc = acc[:3*n]
	for x := 0; x < n; x++ {
		a := acc[3*x : 3*x+3 : 3*x+3]
		d[x] = a[0]*g[0] + a[1]*g[1] + a[2]*g[2] + bias
	}
}

// The stores move a row computed into planar scratch (s, one slice per
// output channel) into a tensor layout the vertical pass cannot write
// directly.

// storeNHWC interleaves three channels into d (3 values per pixel).
func storeNHWC(s *[3][]float32, d []float32) {
	n := len(s[0])
	s1, s2 := s[1][:n], s[2][:n]
	d = d[:3*n]
	for x, v := range s[0] {
		o := d[3*x : 3*x+3 : 3*x+3]
		o[0], o[1], o[2] = v, s1[x], s2[x]
	}
}

// storeNHWCHalf interleaves three channels into d as float16, through
// il (3 values per pixel of scratch).
func storeNHWCHalf(s *[3][]float32, il []float32, d []uint16) {
	il = il[:3*len(s[0])]
	storeNHWC(s, il)
	halvesFast(d, il)
}
