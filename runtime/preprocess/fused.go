package preprocess

// fusedYUV computes one output row (3 channels) straight from its two
// source rows (t: top, b: bottom; y: luma line, c: chroma line) when no
// other output row reads them: both horizontal passes and the vertical
// blend in one loop, sharing each column's offsets and weight and keeping
// the filtered values in registers. It computes what h2YUV twice and
// v2RGB compute.
func fusedYUV(yt, ct, yb, cb []byte, xt []xtap, t *yuvTable, c0, c1, bias *[3]float32, d0, d1, d2 []float32) {
	n := len(xt)
	d0, d1, d2 = d0[:n], d1[:n], d2[:n]
	for i := range xt {
		p := &xt[i]
		w := p.w1
		r0, g0, b0 := t.rgb(yt[p.p0.a], ct[p.p0.b], ct[p.p0.c])
		r1, g1, b1 := t.rgb(yt[p.p1.a], ct[p.p1.b], ct[p.p1.c])
		tr, tg, tb := r0<<wBits+(r1-r0)*w, g0<<wBits+(g1-g0)*w, b0<<wBits+(b1-b0)*w
		r0, g0, b0 = t.rgb(yb[p.p0.a], cb[p.p0.b], cb[p.p0.c])
		r1, g1, b1 = t.rgb(yb[p.p1.a], cb[p.p1.b], cb[p.p1.c])
		br, bg, bb := r0<<wBits+(r1-r0)*w, g0<<wBits+(g1-g0)*w, b0<<wBits+(b1-b0)*w
		d0[i] = float32(tr)*c0[0] + float32(br)*c1[0] + bias[0]
		d1[i] = float32(tg)*c0[1] + float32(bg)*c1[1] + bias[1]
		d2[i] = float32(tb)*c0[2] + float32(bb)*c1[2] + bias[2]
	}
}
