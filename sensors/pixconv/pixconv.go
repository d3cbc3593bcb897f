package pixconv

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"

	"github.com/edged-dev/edged/sensors"
)

// ErrShort means a buffer is smaller than the format needs.
var ErrShort = errors.New("pixconv: buffer too small")

// YCbCr converts one RGB pixel to BT.601 limited-range YCbCr.
func YCbCr(r, g, b uint8) (y, cb, cr uint8) {
	R, G, B := int32(r), int32(g), int32(b)
	y = uint8(((66*R + 129*G + 25*B + 128) >> 8) + 16)
	cb = uint8(((-38*R - 74*G + 112*B + 128) >> 8) + 128)
	cr = uint8(((112*R - 94*G - 18*B + 128) >> 8) + 128)
	return
}

// RGB converts one BT.601 limited-range YCbCr pixel back to RGB.
func RGB(y, cb, cr uint8) (r, g, b uint8) {
	c := 298 * (int32(y) - 16)
	d := int32(cb) - 128
	e := int32(cr) - 128
	return clamp((c + 409*e + 128) >> 8), clamp((c - 100*d - 208*e + 128) >> 8), clamp((c + 516*d + 128) >> 8)
}

// Luma is full-range BT.601 luma, the GREY encoding.
func Luma(r, g, b uint8) uint8 {
	return uint8((77*uint32(r) + 150*uint32(g) + 29*uint32(b) + 128) >> 8)
}

func clamp(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// Validate reports whether f can be converted: positive size, even width
// for 4:2:2 and 4:2:0, even height for 4:2:0, and a stride of at least the
// packed line.
func Validate(f sensors.Format) error {
	if f.Width <= 0 || f.Height <= 0 {
		return fmt.Errorf("%w: %dx%d: width and height must be positive", sensors.ErrFormat, f.Width, f.Height)
	}
	switch f.Pixel {
	case sensors.YUYV, sensors.UYVY:
		if f.Width%2 != 0 {
			return fmt.Errorf("%w: %s needs an even width, got %d", sensors.ErrFormat, f.Pixel, f.Width)
		}
	case sensors.NV12:
		if f.Width%2 != 0 || f.Height%2 != 0 {
			return fmt.Errorf("%w: NV12 needs an even width and height, got %dx%d", sensors.ErrFormat, f.Width, f.Height)
		}
	case sensors.GREY, sensors.RGB24, sensors.BGR24, sensors.MJPEG:
	default:
		return fmt.Errorf("%w: %s (want YUYV, UYVY, NV12, GREY, RGB24, BGR24 or MJPEG)", sensors.ErrFormat, f.Pixel)
	}
	if f.Stride != 0 && f.Stride < f.Pixel.PackedLine(f.Width) {
		return fmt.Errorf("%w: stride %d is shorter than a %d-pixel %s line", sensors.ErrFormat, f.Stride, f.Width, f.Pixel)
	}
	return nil
}

// RawSize is the exact size of an uncompressed frame of format f
// (f.FrameSize() without the MJPEG allowance). For MJPEG it is the size of
// the decoded RGB24 image.
func RawSize(f sensors.Format) int {
	if f.Pixel == sensors.MJPEG {
		return f.Width * f.Height * 3
	}
	return f.FrameSize()
}

// FromRGB24 converts the f.Width×f.Height RGB24 image src, whose rows are
// srcStride bytes apart, into dst in format f. It returns the number of
// bytes written, RawSize(f). MJPEG is not an output of this function.
func FromRGB24(dst []byte, f sensors.Format, src []byte, srcStride int) (int, error) {
	if err := Validate(f); err != nil {
		return 0, err
	}
	if f.Pixel == sensors.MJPEG {
		return 0, fmt.Errorf("%w: pixconv cannot encode MJPEG; use image/jpeg", sensors.ErrFormat)
	}
	w, h := f.Width, f.Height
	if srcStride < 3*w || len(src) < srcStride*(h-1)+3*w {
		return 0, fmt.Errorf("%w: RGB24 source of %d bytes, stride %d, for %dx%d", ErrShort, len(src), srcStride, w, h)
	}
	n := RawSize(f)
	if len(dst) < n {
		return 0, fmt.Errorf("%w: %d bytes for a %s frame of %d bytes", ErrShort, len(dst), f, n)
	}
	ls := f.LineBytes()
	switch f.Pixel {
	case sensors.RGB24:
		for y := 0; y < h; y++ {
			copy(dst[y*ls:y*ls+3*w], src[y*srcStride:])
		}
	case sensors.BGR24:
		for y := 0; y < h; y++ {
			s, d := src[y*srcStride:y*srcStride+3*w], dst[y*ls:y*ls+3*w]
			for i := 0; i+2 < len(s); i += 3 {
				d[i], d[i+1], d[i+2] = s[i+2], s[i+1], s[i]
			}
		}
	case sensors.GREY:
		for y := 0; y < h; y++ {
			s, d := src[y*srcStride:y*srcStride+3*w], dst[y*ls:y*ls+w]
			for x := range d {
				d[x] = Luma(s[3*x], s[3*x+1], s[3*x+2])
			}
		}
	case sensors.YUYV, sensors.UYVY:
		yo, uo, vo := 0, 1, 3
		if f.Pixel == sensors.UYVY {
			yo, uo, vo = 1, 0, 2
		}
		for y := 0; y < h; y++ {
			s, d := src[y*srcStride:y*srcStride+3*w], dst[y*ls:y*ls+2*w]
			for x := 0; x+1 < w; x += 2 {
				y0, cb0, cr0 := YCbCr(s[3*x], s[3*x+1], s[3*x+2])
				y1, cb1, cr1 := YCbCr(s[3*x+3], s[3*x+4], s[3*x+5])
				q := d[2*x : 2*x+4]
				q[yo], q[yo+2] = y0, y1
				q[uo] = avg2(cb0, cb1)
				q[vo] = avg2(cr0, cr1)
			}
		}
	case sensors.NV12:
		uv := dst[ls*h:]
		for y := 0; y+1 < h; y += 2 {
			s0 := src[y*srcStride : y*srcStride+3*w]
			s1 := src[(y+1)*srcStride : (y+1)*srcStride+3*w]
			d0, d1 := dst[y*ls:y*ls+w], dst[(y+1)*ls:(y+1)*ls+w]
			c := uv[(y/2)*ls : (y/2)*ls+w]
			for x := 0; x+1 < w; x += 2 {
				ya, cba, cra := YCbCr(s0[3*x], s0[3*x+1], s0[3*x+2])
				yb, cbb, crb := YCbCr(s0[3*x+3], s0[3*x+4], s0[3*x+5])
				yc, cbc, crc := YCbCr(s1[3*x], s1[3*x+1], s1[3*x+2])
				yd, cbd, crd := YCbCr(s1[3*x+3], s1[3*x+4], s1[3*x+5])
				d0[x], d0[x+1], d1[x], d1[x+1] = ya, yb, yc, yd
				c[x] = avg4(cba, cbb, cbc, cbd)
				c[x+1] = avg4(cra, crb, crc, crd)
			}
		}
	}
	return n, nil
}

func avg2(a, b uint8) uint8 { return uint8((uint16(a) + uint16(b) + 1) >> 1) }
func avg4(a, b, c, d uint8) uint8 {
	return uint8((uint16(a) + uint16(b) + uint16(c) + uint16(d) + 2) >> 2)
}

// ToRGB24 decodes the frame src of format f into dst as packed RGB24
// (f.Width*3 bytes per row). It is the reference decoder used by tests and
// by CPU code; MJPEG goes through image/jpeg and allocates.
func ToRGB24(dst []byte, f sensors.Format, src []byte) error {
	if err := Validate(f); err != nil {
		return err
	}
	w, h := f.Width, f.Height
	if len(dst) < 3*w*h {
		return fmt.Errorf("%w: %d bytes for %dx%d RGB24", ErrShort, len(dst), w, h)
	}
	if f.Pixel == sensors.MJPEG {
		// Check the header first: the decoder allocates whatever size the
		// header claims.
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(src))
		if err != nil {
			return fmt.Errorf("pixconv: MJPEG frame of %d bytes: %w", len(src), err)
		}
		if cfg.Width != w || cfg.Height != h {
			return fmt.Errorf("%w: MJPEG frame is %dx%d, format says %dx%d", sensors.ErrFormat, cfg.Width, cfg.Height, w, h)
		}
		img, err := jpeg.Decode(bytes.NewReader(src))
		if err != nil {
			return fmt.Errorf("pixconv: MJPEG frame of %d bytes: %w", len(src), err)
		}
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			return fmt.Errorf("%w: MJPEG frame is %dx%d, format says %dx%d", sensors.ErrFormat, b.Dx(), b.Dy(), w, h)
		}
		return ImageToRGB24(dst, 3*w, img)
	}
	if n := RawSize(f); len(src) < n {
		return fmt.Errorf("%w: %d bytes for a %s frame of %d bytes", ErrShort, len(src), f, n)
	}
	ls := f.LineBytes()
	for y := 0; y < h; y++ {
		d := dst[3*w*y : 3*w*(y+1)]
		s := src[y*ls:]
		switch f.Pixel {
		case sensors.RGB24:
			copy(d, s[:3*w])
		case sensors.BGR24:
			for i := 0; i < 3*w; i += 3 {
				d[i], d[i+1], d[i+2] = s[i+2], s[i+1], s[i]
			}
		case sensors.GREY:
			for x := 0; x < w; x++ {
				d[3*x], d[3*x+1], d[3*x+2] = s[x], s[x], s[x]
			}
		case sensors.YUYV, sensors.UYVY:
			yo, uo, vo := 0, 1, 3
			if f.Pixel == sensors.UYVY {
				yo, uo, vo = 1, 0, 2
			}
			for x := 0; x+1 < w; x += 2 {
				q := s[2*x : 2*x+4]
				d[3*x], d[3*x+1], d[3*x+2] = RGB(q[yo], q[uo], q[vo])
				d[3*x+3], d[3*x+4], d[3*x+5] = RGB(q[yo+2], q[uo], q[vo])
			}
		case sensors.NV12:
			c := src[ls*h+(y/2)*ls:]
			for x := 0; x+1 < w; x += 2 {
				d[3*x], d[3*x+1], d[3*x+2] = RGB(s[x], c[x], c[x+1])
				d[3*x+3], d[3*x+4], d[3*x+5] = RGB(s[x+1], c[x], c[x+1])
			}
		}
	}
	return nil
}

// ImageToRGB24 writes img (any image.Image, origin at its bounds' minimum)
// into dst as RGB24 rows stride bytes apart. Alpha is ignored. The common
// decoder outputs (*image.YCbCr, *image.RGBA, *image.NRGBA, *image.Gray)
// take a fast path.
func ImageToRGB24(dst []byte, stride int, img image.Image) error {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return fmt.Errorf("%w: empty image", sensors.ErrFormat)
	}
	if stride < 3*w || len(dst) < stride*(h-1)+3*w {
		return fmt.Errorf("%w: %d bytes, stride %d, for a %dx%d image", ErrShort, len(dst), stride, w, h)
	}
	switch m := img.(type) {
	case *image.RGBA:
		for y := 0; y < h; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			d := dst[y*stride:]
			for x := 0; x < w; x++ {
				d[3*x], d[3*x+1], d[3*x+2] = s[4*x], s[4*x+1], s[4*x+2]
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			d := dst[y*stride:]
			for x := 0; x < w; x++ {
				d[3*x], d[3*x+1], d[3*x+2] = s[4*x], s[4*x+1], s[4*x+2]
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			d := dst[y*stride:]
			for x := 0; x < w; x++ {
				d[3*x], d[3*x+1], d[3*x+2] = s[x], s[x], s[x]
			}
		}
	case *image.YCbCr:
		// image/jpeg produces full-range (JFIF) YCbCr; use its converter.
		for y := 0; y < h; y++ {
			d := dst[y*stride:]
			for x := 0; x < w; x++ {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				d[3*x], d[3*x+1], d[3*x+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			}
		}
	default:
		for y := 0; y < h; y++ {
			d := dst[y*stride:]
			for x := 0; x < w; x++ {
				r, g, bb, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				d[3*x], d[3*x+1], d[3*x+2] = uint8(r>>8), uint8(g>>8), uint8(bb>>8)
			}
		}
	}
	return nil
}
