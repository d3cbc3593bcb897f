package preprocess

import (
	"fmt"

	"github.com/edged-dev/edged/sensors"
)

// checkFrame reports whether src holds a frame of format f that this
// package can read: a supported pixel format, a positive size, lines long
// enough for every pixel (4:2:2 and 4:2:0 chroma is read in pairs, so an
// odd width needs a stride with room for the last pair) and enough bytes.
func checkFrame(src []byte, f sensors.Format) error {
	var line int // bytes one line needs
	switch f.Pixel {
	case sensors.YUYV, sensors.UYVY:
		line = 4 * ((f.Width + 1) / 2)
	case sensors.NV12:
		line = 2 * ((f.Width + 1) / 2)
	case sensors.GREY:
		line = f.Width
	case sensors.RGB24, sensors.BGR24:
		line = 3 * f.Width
	default:
		return fmt.Errorf("%w: pixel format %s (MJPEG must be decoded by the source)", ErrUnsupported, f.Pixel)
	}
	if f.Width <= 0 || f.Height <= 0 {
		return fmt.Errorf("%w: size %dx%d", ErrFrame, f.Width, f.Height)
	}
	if f.Stride < 0 {
		return fmt.Errorf("%w: stride %d", ErrFrame, f.Stride)
	}
	if lb := f.LineBytes(); lb < line {
		return fmt.Errorf("%w: %s lines of %d bytes, need %d", ErrFrame, f, lb, line)
	}
	if need := f.FrameSize(); len(src) < need {
		return fmt.Errorf("%w: %d bytes, %s needs %d", ErrFrame, len(src), f, need)
	}
	return nil
}

// checkTensor reports whether dst holds the output tensor.
func checkTensor(dst []byte, out Output) error {
	if need := out.Bytes(); len(dst) < need {
		return fmt.Errorf("%w: %d bytes, %s needs %d", ErrTensor, len(dst), out, need)
	}
	return nil
}
