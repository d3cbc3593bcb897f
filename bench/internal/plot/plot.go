package plot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Colours shared by the charts.
var (
	White = color.RGBA{255, 255, 255, 255}
	Black = color.RGBA{0, 0, 0, 255}
	Grey  = color.RGBA{120, 120, 120, 255}
	Grid  = color.RGBA{225, 225, 225, 255}
)

// Canvas wraps an image with drawing helpers.
type Canvas struct{ *image.RGBA }

// New returns a white canvas of w x h pixels.
func New(w, h int) Canvas {
	c := Canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	c.Rect(0, 0, w, h, White)
	return c
}

// Rect fills [x0,x1) x [y0,y1).
func (c Canvas) Rect(x0, y0, x1, y1 int, col color.Color) {
	draw.Draw(c.RGBA, image.Rect(x0, y0, x1, y1), &image.Uniform{col}, image.Point{}, draw.Src)
}

// Text draws s with its baseline at y, starting at x, scaled by an integer
// factor; align -1 left, 0 centred, 1 right.
func (c Canvas) Text(x, y int, s string, col color.Color, scale, align int) {
	face := basicfont.Face7x13
	w := font.MeasureString(face, s).Ceil()
	small := image.NewRGBA(image.Rect(0, 0, w, 13))
	d := font.Drawer{Dst: small, Src: &image.Uniform{col}, Face: face, Dot: fixed.P(0, 11)}
	d.DrawString(s)
	switch align {
	case 0:
		x -= w * scale / 2
	case 1:
		x -= w * scale
	}
	y -= 11 * scale
	for sy := 0; sy < 13*scale; sy++ {
		for sx := 0; sx < w*scale; sx++ {
			p := small.RGBAAt(sx/scale, sy/scale)
			if p.A > 0 {
				c.Set(x+sx, y+sy, col)
			}
		}
	}
}

// Line draws a line one pixel wide from (x0,y0) to (x1,y1), both ends
// included (Bresenham).
func (c Canvas) Line(x0, y0, x1, y1 int, col color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		c.Set(x0, y0, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

// DashedH draws a horizontal dashed line at y from x0 to x1.
func (c Canvas) DashedH(x0, x1, y int, col color.Color) {
	for x := x0; x < x1; x += 8 {
		c.Rect(x, y, min(x+4, x1), y+1, col)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// NiceMax rounds v up to 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 or 10 × 10^k and
// returns it with a tick step.
func NiceMax(v float64) (top, step float64) {
	if v <= 0 || math.IsNaN(v) {
		return 1, 0.25
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*e >= v {
			top = m * e
			break
		}
	}
	for _, n := range []float64{4, 5, 6, 3} {
		s := top / n
		if r := s / math.Pow(10, math.Floor(math.Log10(s))); r == 1 || r == 2 || r == 2.5 || r == 5 {
			return top, s
		}
	}
	return top, top / 4
}

// FmtAxis formats an axis value without trailing zeros.
func FmtAxis(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// Panel draws a title, a y axis from 0 to top with a grid every step, and
// the axes in the box, and returns the plot area and the scale (pixels per
// unit). The area leaves 52 pixels below it for labels.
func (c Canvas) Panel(x0, y0, x1, y1 int, title, unit string, top, step float64) (area image.Rectangle, ppu float64) {
	return c.PanelRange(x0, y0, x1, y1, title, unit, 0, top, step)
}

// PanelRange is Panel with a y axis from bottom to top.
func (c Canvas) PanelRange(x0, y0, x1, y1 int, title, unit string, bottom, top, step float64) (area image.Rectangle, ppu float64) {
	c.Text((x0+x1)/2, y0+16, title, Black, 1, 0)
	area = image.Rect(x0+48, y0+30, x1-8, y1-52)
	ppu = float64(area.Dy()) / (top - bottom)
	for v := bottom; v <= top+step/2; v += step {
		y := area.Max.Y - int((v-bottom)*ppu)
		c.Rect(area.Min.X, y, area.Max.X, y+1, Grid)
		c.Text(area.Min.X-5, y+4, FmtAxis(v), Grey, 1, 1)
	}
	c.Text(x0+4, area.Min.Y-6, unit, Grey, 1, -1)
	c.Rect(area.Min.X, area.Min.Y, area.Min.X+1, area.Max.Y, Grey)
	c.Rect(area.Min.X, area.Max.Y, area.Max.X, area.Max.Y+1, Grey)
	return area, ppu
}

// SavePNG writes the canvas to path.
func (c Canvas) SavePNG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.RGBA); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
