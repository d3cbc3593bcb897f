package v4l2

import (
	"fmt"
	"strings"

	"github.com/edged-dev/edged/sensors"
)

// FormatInfo is one pixel format a camera offers.
type FormatInfo struct {
	Pixel       sensors.PixelFormat
	Description string
	Compressed  bool
	Sizes       []SizeInfo
}

// SizeInfo is one frame size. For a stepwise or continuous range Width and
// Height are the minimum and MaxWidth, MaxHeight, StepWidth, StepHeight
// describe the range (zero for a discrete size). FPS lists the discrete
// rates, or the slowest and fastest of a range.
type SizeInfo struct {
	Width, Height                              int
	MaxWidth, MaxHeight, StepWidth, StepHeight int
	FPS                                        []float64
}

// Offers is what a camera can deliver.
type Offers []FormatInfo

func (l Offers) has(p sensors.PixelFormat) bool {
	for _, f := range l {
		if f.Pixel == p {
			return true
		}
	}
	return false
}

// String lists the offers compactly, e.g.
// "YUYV 640x480@30/15 1280x720@10; MJPG 1920x1080@30".
func (l Offers) String() string {
	if len(l) == 0 {
		return "no formats"
	}
	var b strings.Builder
	for i, f := range l {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Pixel.String())
		for _, s := range f.Sizes {
			if s.MaxWidth > 0 {
				fmt.Fprintf(&b, " %dx%d..%dx%d", s.Width, s.Height, s.MaxWidth, s.MaxHeight)
			} else {
				fmt.Fprintf(&b, " %dx%d", s.Width, s.Height)
			}
			for j, r := range s.FPS {
				sep := "/"
				if j == 0 {
					sep = "@"
				}
				fmt.Fprintf(&b, "%s%g", sep, r)
			}
		}
	}
	return b.String()
}
