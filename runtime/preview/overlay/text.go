package overlay

import (
	"image"
	"image/color"
	"unicode/utf8"

	"golang.org/x/image/font/basicfont"
)

// The font: basicfont's 7x13 glyphs, 6 pixels wide with 1 between them.
var (
	face      = basicfont.Face7x13
	glyphs    = face.Mask.(*image.Alpha)
	glyphRows = face.Ascent + face.Descent
)

// LineHeight is the height of a line of text at scale s, in pixels.
func LineHeight(s int) int { return face.Height * s }

// TextWidth is the width of text at scale s, in pixels.
func TextWidth(text string, s int) int {
	return utf8.RuneCountInString(text) * face.Advance * s
}

// glyphIndex is the row of glyphs holding r; unknown runes get U+FFFD.
func glyphIndex(r rune) int {
	for _, rg := range face.Ranges {
		if r >= rg.Low && r < rg.High {
			return int(r-rg.Low) + rg.Offset
		}
	}
	last := face.Ranges[len(face.Ranges)-1]
	return last.Offset
}

// Text draws text with its top-left corner at (x, y) in colour c, each
// font pixel an s×s square, clipped to img. It returns the x after the
// last glyph.
func Text(img *image.RGBA, x, y int, text string, c color.RGBA, s int) int {
	s = max(s, 1)
	for _, r := range text {
		gy := glyphIndex(r) * glyphRows
		for row := 0; row < glyphRows; row++ {
			for col := 0; col < face.Width; col++ {
				if glyphs.AlphaAt(col, gy+row).A < 0x80 {
					continue
				}
				Fill(img, image.Rect(x+col*s, y+row*s, x+(col+1)*s, y+(row+1)*s), c)
			}
		}
		x += face.Advance * s
	}
	return x
}

// Fill paints r (clipped to img) in c.
func Fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		row := img.Pix[img.PixOffset(r.Min.X, y):img.PixOffset(r.Max.X, y)]
		for i := 0; i < len(row); i += 4 {
			row[i], row[i+1], row[i+2], row[i+3] = c.R, c.G, c.B, 0xff
		}
	}
}

// Shade darkens r (clipped to img) to a quarter of its brightness, the
// background of text over a picture.
func Shade(img *image.RGBA, r image.Rectangle) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		row := img.Pix[img.PixOffset(r.Min.X, y):img.PixOffset(r.Max.X, y)]
		for i := 0; i < len(row); i += 4 {
			row[i], row[i+1], row[i+2] = row[i]>>2, row[i+1]>>2, row[i+2]>>2
		}
	}
}

// Label draws text on a shaded band (or one of colour bg when bg.A is not
// 0, the text then black or white, whichever reads better on it) with its
// top-left corner at (x, y), moved inside img when it would stick out. It
// returns the band.
func Label(img *image.RGBA, x, y int, text string, bg color.RGBA, s int) image.Rectangle {
	pad := s + 1
	w, h := TextWidth(text, s)+2*pad, LineHeight(s)+pad
	x = max(min(x, img.Rect.Max.X-w), img.Rect.Min.X)
	y = max(min(y, img.Rect.Max.Y-h), img.Rect.Min.Y)
	band := image.Rect(x, y, x+w, y+h)
	fg := color.RGBA{0xff, 0xff, 0xff, 0xff}
	if bg.A == 0 {
		Shade(img, band)
	} else {
		Fill(img, band, bg)
		if luma(bg) > 140 {
			fg = color.RGBA{0, 0, 0, 0xff}
		}
	}
	Text(img, x+pad, y+pad/2+s, text, fg, s)
	return band
}

func luma(c color.RGBA) int { return (77*int(c.R) + 150*int(c.G) + 29*int(c.B)) >> 8 }
