package demomodel

import (
	"fmt"
	"math"

	"github.com/edged-dev/edged/internal/demoscene"
)

// Square is the white square of a demo scene, in pixels of the model input:
// columns X..X+Side-1 and rows Y..Y+Side-1.
type Square struct{ X, Y, Side int }

// Centre is the square's centre relative to an input of size×size pixels,
// which is what the centroid output reports for it.
func (q Square) Centre(size int) (x, y float32) {
	return (float32(q.X) + float32(q.Side)/2) / float32(size),
		(float32(q.Y) + float32(q.Side)/2) / float32(size)
}

// Render writes a demo scene into img, a [1,3,size,size] float32 tensor of
// RGB planes in [0,1]: background palette entry bg with the square q drawn
// white (clipped to the image). Tests and hardware comparisons use it to
// feed the model a frame with known answers.
func Render(img []float32, size, bg int, q Square) error {
	plane := size * size
	if size <= 0 || len(img) < 3*plane {
		return fmt.Errorf("demomodel: render %dx%d needs %d floats, have %d", size, size, 3*plane, len(img))
	}
	if bg < 0 || bg >= Classes {
		return fmt.Errorf("demomodel: background %d is out of range 0..%d", bg, Classes-1)
	}
	p := demoscene.Palette[bg]
	sq := demoscene.SquareColor
	bgc := [3]float32{float32(p.R) / 255, float32(p.G) / 255, float32(p.B) / 255}
	sqc := [3]float32{float32(sq.R) / 255, float32(sq.G) / 255, float32(sq.B) / 255}
	for y := range size {
		inY := y >= q.Y && y < q.Y+q.Side
		for x := range size {
			c := &bgc
			if inY && x >= q.X && x < q.X+q.Side {
				c = &sqc
			}
			i := y*size + x
			img[i], img[plane+i], img[2*plane+i] = c[0], c[1], c[2]
		}
	}
	return nil
}

// Reference computes what the model built from o outputs for img (a
// [1,3,S,S] float32 tensor), in plain Go. It follows the graph step by step
// and serves as the numeric reference that backends are compared against.
func Reference(o Options, img []float32) (class [Classes]float32, centroid [2]float32, err error) {
	if err := o.Validate(); err != nil {
		return class, centroid, err
	}
	s := o.size()
	plane := s * s
	if len(img) < 3*plane {
		return class, centroid, fmt.Errorf("demomodel: reference needs %d floats, have %d", 3*plane, len(img))
	}
	eps := float32(Epsilon)
	if o.NaN {
		eps = float32(math.NaN())
	}
	var bgSum [3]float32
	var bgCount, sqCount, sumX, sumY float32
	for y := range s {
		for x := range s {
			i := y*s + x
			r, g, b := img[i], img[plane+i], img[2*plane+i]
			if min(r, g, b) > Threshold {
				sqCount++
				sumX += (float32(x) + 0.5) / float32(s)
				sumY += (float32(y) + 0.5) / float32(s)
				continue
			}
			bgCount++
			bgSum[0] += r
			bgSum[1] += g
			bgSum[2] += b
		}
	}
	var m [3]float32
	for ch := range m {
		m[ch] = bgSum[ch] / (bgCount + eps)
	}
	w, bias := paletteWeights(o.Permutation)
	var logits [Classes]float32
	maxL := float32(math.Inf(-1))
	for j := range logits {
		l := bias[j]
		for ch := range m {
			l += m[ch] * w[ch*Classes+j]
		}
		logits[j] = l
		maxL = max(maxL, l)
	}
	var z float32
	for j := range logits {
		class[j] = float32(math.Exp(float64(logits[j] - maxL)))
		z += class[j]
	}
	for j := range class {
		class[j] /= z
	}
	centroid[0] = sumX / (sqCount + eps)
	centroid[1] = sumY / (sqCount + eps)
	return class, centroid, nil
}

// Argmax returns the index of the largest element (the first on ties), or -1
// when v is empty or holds a NaN.
func Argmax(v []float32) int {
	best := -1
	for i, x := range v {
		if x != x {
			return -1
		}
		if best < 0 || x > v[best] {
			best = i
		}
	}
	return best
}
