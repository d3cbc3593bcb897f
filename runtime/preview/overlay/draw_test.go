package overlay

import (
	"image"
	"image/color"
	"math"
	"testing"

	"github.com/edged-dev/edged/runtime/stream"
)

func grey(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	return img
}

func changed(a, b *image.RGBA, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.RGBAAt(x, y) != b.RGBAAt(x, y) {
				n++
			}
		}
	}
	return n
}

// TestText: a glyph sets pixels of its colour inside its cell only; a
// space sets none; a rune the font lacks draws the replacement box.
func TestText(t *testing.T) {
	img, ref := grey(64, 32), grey(64, 32)
	red := color.RGBA{0xff, 0, 0, 0xff}
	if x := Text(img, 2, 2, " ", red, 1); x != 2+7 || changed(img, ref, img.Rect) != 0 {
		t.Fatalf("a space: x %d, %d pixels changed", x, changed(img, ref, img.Rect))
	}
	Text(img, 2, 2, "A", red, 2)
	cell := image.Rect(2, 2, 2+12, 2+26)
	if n := changed(img, ref, cell); n < 20 {
		t.Errorf("'A' at scale 2 set %d pixels", n)
	}
	if n := changed(img, ref, img.Rect) - changed(img, ref, cell); n != 0 {
		t.Errorf("%d pixels outside the glyph's cell changed", n)
	}
	other := grey(64, 32)
	Text(other, 2, 2, "\u4e2d", red, 1)
	if changed(other, ref, other.Rect) == 0 {
		t.Error("a rune outside the font drew nothing")
	}
	if TextWidth("ab\u4e2d", 2) != 3*14 {
		t.Errorf("TextWidth %d", TextWidth("ab\u4e2d", 2))
	}
}

// TestDrawDetections: a box's border is in its class's colour where the
// detection says, with the picture scale applied; its inside is the
// frame's (but for the label); keypoints below MinKeypointScore are not
// drawn, the others are; a classifier's classes are listed top left.
func TestDrawDetections(t *testing.T) {
	const w, h = 320, 240
	img, ref := grey(w, h), grey(w, h)
	kp := make([]float32, 17*3)
	for i := 0; i < 17; i++ {
		kp[3*i], kp[3*i+1], kp[3*i+2] = 400+float32(i)*10, 300+float32(i)*5, 0.9
	}
	kp[3*16+2] = 0.1 // the last point is not visible
	outs := []stream.Output{
		{Kind: stream.OutputDetections, KeypointDims: 3, Detections: []stream.Detection{
			{Box: [4]float32{100, 200, 300, 400}, Class: 2, Label: "person", Score: 0.87, Keypoints: kp},
		}},
		{Kind: stream.OutputClasses, Classes: []stream.Class{{Index: 1, Label: "cat", Score: 0.5}}},
		{Kind: stream.OutputRaw, Data: []float32{1, 2}},
	}
	Draw(img, outs, Scale{X: 0.5, Y: 0.5}) // camera 640x480 onto 320x240
	box := image.Rect(50, 100, 150, 200)
	c := Palette[2]
	for _, p := range []image.Point{{50, 150}, {149, 150}, {100, 199}, {51, 120}} {
		if got := img.RGBAAt(p.X, p.Y); got != c {
			t.Errorf("border pixel %v is %v, want the class colour %v", p, got, c)
		}
	}
	if n := changed(img, ref, image.Rect(box.Min.X+4, box.Min.Y+20, box.Min.X+40, box.Max.Y-4)); n != 0 {
		t.Errorf("%d pixels inside the box, left of its keypoints, changed", n)
	}
	// The label band is above the box.
	if changed(img, ref, image.Rect(50, 80, 120, 99)) == 0 {
		t.Error("no label above the box")
	}
	// Keypoint 0 at (200, 150); 16 (not visible) at (280, 190).
	if img.RGBAAt(200, 150) == ref.RGBAAt(200, 150) {
		t.Error("keypoint 0 not drawn")
	}
	if img.RGBAAt(280, 190) != ref.RGBAAt(280, 190) {
		t.Error("a keypoint below MinKeypointScore was drawn")
	}
	if changed(img, ref, image.Rect(0, 0, 60, 16)) == 0 {
		t.Error("the classes are not listed top left")
	}
}

// TestDrawHostileCoordinates: NaN, infinite and huge coordinates draw
// without a panic and within the picture.
func TestDrawHostileCoordinates(t *testing.T) {
	img := grey(64, 48)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	kp := []float32{nan, nan, inf, -inf, 1e30, -1e30}
	outs := []stream.Output{{Kind: stream.OutputDetections, KeypointDims: 2, Detections: []stream.Detection{
		{Box: [4]float32{nan, -inf, inf, 1e38}, Class: -3, Score: nan, Keypoints: kp},
		{Box: [4]float32{50, 40, 10, 5}, Class: 1 << 30},
	}}}
	Draw(img, outs, Scale{X: 1, Y: 1})
	Line(img, image.Pt(-1<<40, 3), image.Pt(1<<40, 1<<40), Palette[0], 3)
	Caption(img, "frame 12  12:00:00.000")
}

func BenchmarkDraw(b *testing.B) {
	img := grey(640, 360)
	outs := []stream.Output{{Kind: stream.OutputDetections, Detections: make([]stream.Detection, 20)}}
	for i := range outs[0].Detections {
		outs[0].Detections[i] = stream.Detection{Box: [4]float32{float32(i * 50), 100, float32(i*50 + 120), 400}, Class: i, Label: "person", Score: 0.5}
	}
	for b.Loop() {
		Draw(img, outs, Scale{X: 0.333, Y: 0.333})
		Caption(img, "frame 12345  2025-01-02 12:00:00.000")
	}
}
