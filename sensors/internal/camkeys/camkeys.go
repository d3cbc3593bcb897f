package camkeys

import (
	"math"

	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/sensors"
)

// DefaultBuffers is a camera's buffers when left out.
const DefaultBuffers = 4

// Frames are a local camera's frame keys.
type Frames struct {
	Width   int     `toml:"width"`
	Height  int     `toml:"height"`
	Format  string  `toml:"format"`
	FPS     float64 `toml:"fps"`
	Buffers int     `toml:"buffers"`
}

// Defaults fills buffers, and the format with format unless it is "".
func (f *Frames) Defaults(format string) {
	if f.Buffers == 0 {
		f.Buffers = DefaultBuffers
	}
	confkeys.Default(&f.Format, format)
}

// Check checks the frame keys of a camera of kind: its size (which
// sizeOptional lets it leave out), format, rate (zero says what fps = 0
// means for it) and buffers.
func (f *Frames) Check(p confkeys.Problems, kind string, sizeOptional bool, zero string) {
	if !sizeOptional || f.Width != 0 || f.Height != 0 {
		bad := func(n int) bool { return n <= 0 || n > 16384 }
		switch key := "width"; {
		case f.Width == 0 && f.Height == 0:
			p.Add("width", "missing: a %s source needs width and height (the frame size in pixels)", kind)
		case bad(f.Width) || bad(f.Height):
			if !bad(f.Width) {
				key = "height"
			}
			p.Add(key, "width and height must be between 1 and 16384 (got %dx%d)", f.Width, f.Height)
		}
	}
	if f.Format != "" {
		if _, err := sensors.ParsePixelFormat(f.Format); err != nil {
			p.Add("format", "%q is not one of \"YUYV\", \"UYVY\", \"NV12\", \"GREY\", \"RGB24\", \"BGR24\", \"MJPEG\"", f.Format)
		}
	}
	if f.FPS < 0 || f.FPS > 1000 || math.IsNaN(f.FPS) {
		p.Add("fps", "must be between 0 (%s) and 1000 frames per second", zero)
	}
	if f.Buffers < 2 || f.Buffers > 32 {
		p.Add("buffers", "must be between 2 and 32")
	}
}
