package jpeg

import (
	"bytes"
	"fmt"
	"image/jpeg"

	"github.com/edged-dev/edged/sensors/pixconv"
)

// stdBackend is image/jpeg: the fallback. It allocates per frame.
type stdBackend struct{}

func (stdBackend) decode(dst, src []byte, denom int) (int, int, error) {
	src, err := WithDefaultHuffman(nil, src)
	if err != nil {
		return 0, 0, err
	}
	c, err := jpeg.DecodeConfig(bytes.NewReader(src))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: image/jpeg: %w", ErrCorrupt, err)
	}
	if c.Width <= 0 || c.Height <= 0 {
		return 0, 0, fmt.Errorf("%w: image/jpeg: %dx%d image", ErrCorrupt, c.Width, c.Height)
	}
	w, h := ScaledSize(c.Width, c.Height, denom)
	if len(dst) < 3*w*h {
		return 0, 0, fmt.Errorf("%w: %d bytes for a %dx%d RGB24 image", ErrShort, len(dst), w, h)
	}
	img, err := jpeg.Decode(bytes.NewReader(src))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: image/jpeg: %w", ErrCorrupt, err)
	}
	if denom == 1 {
		return w, h, pixconv.ImageToRGB24(dst, 3*w, img)
	}
	full := make([]byte, 3*c.Width*c.Height)
	if err := pixconv.ImageToRGB24(full, 3*c.Width, img); err != nil {
		return 0, 0, err
	}
	BoxDown(dst, full, c.Width, c.Height, denom)
	return w, h, nil
}

func (stdBackend) close() {}

// BoxDown averages denom×denom blocks of the sw×sh RGB24 image src (rows
// 3*sw apart) into dst, ScaledSize(sw, sh, denom) with rows 3*w apart;
// blocks at the right and bottom edges average the pixels they have.
func BoxDown(dst, src []byte, sw, sh, denom int) {
	w, h := ScaledSize(sw, sh, denom)
	for y := 0; y < h; y++ {
		y0, y1 := y*denom, min((y+1)*denom, sh)
		for x := 0; x < w; x++ {
			x0, x1 := x*denom, min((x+1)*denom, sw)
			var r, g, b, n int
			for yy := y0; yy < y1; yy++ {
				row := src[3*(yy*sw+x0) : 3*(yy*sw+x1)]
				for i := 0; i < len(row); i += 3 {
					r += int(row[i])
					g += int(row[i+1])
					b += int(row[i+2])
				}
				n += x1 - x0
			}
			d := dst[3*(y*w+x):]
			d[0], d[1], d[2] = uint8((r+n/2)/n), uint8((g+n/2)/n), uint8((b+n/2)/n)
		}
	}
}
