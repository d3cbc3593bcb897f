package overlay

import (
	"image"
	"image/color"
	"strconv"

	"github.com/edged-dev/edged/runtime/stream"
)

// Palette colours detections by class (class modulo its length): distinct
// hues that read on camera pictures.
var Palette = []color.RGBA{
	{0xff, 0x38, 0x38, 0xff}, {0x2e, 0xcc, 0x71, 0xff}, {0x34, 0x98, 0xff, 0xff}, {0xff, 0xc1, 0x07, 0xff},
	{0xe0, 0x40, 0xfb, 0xff}, {0x00, 0xe5, 0xff, 0xff}, {0xff, 0x70, 0x43, 0xff}, {0xc6, 0xff, 0x00, 0xff},
	{0xff, 0x40, 0x81, 0xff}, {0x7c, 0x4d, 0xff, 0xff}, {0x1d, 0xe9, 0xb6, 0xff}, {0xff, 0xab, 0x40, 0xff},
}

// MinKeypointScore is the score below which a keypoint (of a model that
// scores them) is not drawn: the model says it is not visible.
const MinKeypointScore = 0.5

// Scale maps a record's coordinates (camera pixels) onto the picture:
// picture x = camera x × X.
type Scale struct{ X, Y float32 }

// TextScale is the font scale for a picture w pixels wide: 1 up to 960,
// then one more per 960.
func TextScale(w int) int { return 1 + w/960 }

// Draw draws every output of outs onto img: detections (boxes, labels,
// scores, keypoints) where they are, and the classes of top-k outputs in
// the top-left corner. Raw outputs are not drawn.
func Draw(img *image.RGBA, outs []stream.Output, sc Scale) {
	s := TextScale(img.Rect.Dx())
	y := img.Rect.Min.Y
	for i := range outs {
		o := &outs[i]
		switch o.Kind {
		case stream.OutputDetections:
			for j := range o.Detections {
				drawDetection(img, &o.Detections[j], o.KeypointDims, sc, s)
			}
		case stream.OutputClasses:
			y = drawClasses(img, o.Classes, y, s)
		}
	}
}

// drawDetection draws one detection's box, its keypoints and its label
// above the box (inside it when the box touches the top).
func drawDetection(img *image.RGBA, d *stream.Detection, dims int, sc Scale, s int) {
	c := Palette[uint(d.Class)%uint(len(Palette))]
	r := image.Rectangle{pixel(img.Rect, d.Box[0], d.Box[1], sc), pixel(img.Rect, d.Box[2], d.Box[3], sc)}
	Border(img, r, c, max(2, img.Rect.Dx()/320))
	if dims >= 2 {
		drawKeypoints(img, d.Keypoints, dims, sc, c, s)
	}
	var buf [96]byte
	text := append(buf[:0], labelOf(d.Label, d.Class)...)
	text = append(text, ' ')
	text = strconv.AppendFloat(text, float64(d.Score), 'f', 2, 32)
	y := r.Min.Y - LineHeight(s) - s - 1
	if y < img.Rect.Min.Y {
		y = r.Min.Y
	}
	Label(img, r.Min.X, y, string(text), c, s)
}

// labelOf is a label, or "class N" when the model has none.
func labelOf(label string, class int) string {
	if label != "" {
		return label
	}
	return "class " + strconv.Itoa(class)
}

// drawClasses lists classes (label and score) from y down, one line each;
// it returns the y below them.
func drawClasses(img *image.RGBA, cs []stream.Class, y, s int) int {
	for _, c := range cs {
		var buf [96]byte
		text := append(buf[:0], labelOf(c.Label, c.Index)...)
		text = append(text, ' ')
		text = strconv.AppendFloat(text, float64(c.Score), 'f', 2, 32)
		y = Label(img, img.Rect.Min.X, y, string(text), color.RGBA{}, s).Max.Y
	}
	return y
}

// cocoSkeleton joins the 17 COCO keypoints (nose, eyes, ears, shoulders,
// elbows, wrists, hips, knees, ankles) as Ultralytics draws them.
var cocoSkeleton = [][2]int{
	{15, 13}, {13, 11}, {16, 14}, {14, 12}, {11, 12}, {5, 11}, {6, 12}, {5, 6}, {5, 7},
	{6, 8}, {7, 9}, {8, 10}, {1, 2}, {0, 1}, {0, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6},
}

// drawKeypoints draws a pose's points (dims values each: x, y[, score]) as
// dots, and COCO's skeleton between visible points when there are 17.
func drawKeypoints(img *image.RGBA, kp []float32, dims int, sc Scale, c color.RGBA, s int) {
	n := len(kp) / dims
	at := func(i int) (image.Point, bool) {
		v := kp[i*dims:]
		if dims >= 3 && v[2] < MinKeypointScore {
			return image.Point{}, false
		}
		return pixel(img.Rect, v[0], v[1], sc), true
	}
	if n == 17 {
		for _, e := range cocoSkeleton {
			a, okA := at(e[0])
			b, okB := at(e[1])
			if okA && okB {
				Line(img, a, b, c, max(1, s))
			}
		}
	}
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	for i := 0; i < n; i++ {
		if p, ok := at(i); ok {
			Dot(img, p, 2+s, c)
			Dot(img, p, s, white)
		}
	}
}

// Border draws r's outline, t pixels thick, inside r.
func Border(img *image.RGBA, r image.Rectangle, c color.RGBA, t int) {
	r = r.Canon()
	t = min(t, (r.Dx()+1)/2, (r.Dy()+1)/2)
	Fill(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+t), c)
	Fill(img, image.Rect(r.Min.X, r.Max.Y-t, r.Max.X, r.Max.Y), c)
	Fill(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+t, r.Max.Y), c)
	Fill(img, image.Rect(r.Max.X-t, r.Min.Y, r.Max.X, r.Max.Y), c)
}

// Dot draws a filled square of radius r around p.
func Dot(img *image.RGBA, p image.Point, r int, c color.RGBA) {
	Fill(img, image.Rect(p.X-r, p.Y-r, p.X+r+1, p.Y+r+1), c)
}

// Line draws a line from a to b, t pixels wide (Bresenham's, with a t×t
// square at each step). Ends far outside img are brought within a
// picture's size of it first.
func Line(img *image.RGBA, a, b image.Point, c color.RGBA, t int) {
	a, b = near(img.Rect, a), near(img.Rect, b)
	dx, dy := abs(b.X-a.X), -abs(b.Y-a.Y)
	sx, sy := sign(b.X-a.X), sign(b.Y-a.Y)
	e := dx + dy
	h := t / 2
	for {
		Fill(img, image.Rect(a.X-h, a.Y-h, a.X-h+t, a.Y-h+t), c)
		if a == b {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			a.X += sx
		}
		if e2 <= dx {
			e += dx
			a.Y += sy
		}
	}
}

// pixel is the picture's pixel for camera coordinates (x, y), near r
// whatever the model said (NaN and infinities included).
func pixel(r image.Rectangle, x, y float32, sc Scale) image.Point {
	fx, fy := x*sc.X, y*sc.Y
	w, h := float32(r.Dx()), float32(r.Dy())
	if !(fx >= -w) { // NaN too
		fx = -w
	}
	if !(fy >= -h) {
		fy = -h
	}
	return near(r, image.Pt(int(min(fx, 2*w)+0.5), int(min(fy, 2*h)+0.5)))
}

// near clamps p to r grown by r's size on every side.
func near(r image.Rectangle, p image.Point) image.Point {
	w, h := r.Dx(), r.Dy()
	p.X = min(max(p.X, r.Min.X-w), r.Max.X+w)
	p.Y = min(max(p.Y, r.Min.Y-h), r.Max.Y+h)
	return p
}

// Caption draws text on a shaded band in the picture's bottom-left corner.
func Caption(img *image.RGBA, text string) {
	s := TextScale(img.Rect.Dx())
	Label(img, img.Rect.Min.X, img.Rect.Max.Y, text, color.RGBA{}, s)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
