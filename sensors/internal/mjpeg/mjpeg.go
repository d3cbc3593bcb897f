package mjpeg

import (
	"fmt"
	"sync"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
)

// Decoder decodes one source's MJPEG frames into slots.
type Decoder struct {
	opts jpeg.Options
	info jpeg.Backend

	decMu sync.Mutex
	dec   *jpeg.Decoder // nil after Close until the next Decode

	mu         sync.Mutex
	tw, th     int // engine input; 0 = unknown
	resize     string
	fw, fh     int // camera size the cached scale is for
	denom      int
	why        string
	haveCached bool
}

// New makes the decoder (nvJPEG when o.GPU is set, else libjpeg-turbo,
// else image/jpeg; see jpeg.New).
func New(o jpeg.Options) (*Decoder, error) {
	d, err := jpeg.New(o)
	if err != nil {
		return nil, err
	}
	return &Decoder{opts: o, info: d.Backend(), dec: d}, nil
}

// Backend says which decoder serves.
func (d *Decoder) Backend() jpeg.Backend { return d.info }

// SetDecodeTarget announces the engine input size and resize mode
// (preprocess "stretch" or "letterbox"); later frames are decoded at the
// smallest scale that covers it. It may be called at any time.
func (d *Decoder) SetDecodeTarget(w, h int, resize string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tw, d.th, d.resize, d.haveCached = w, h, resize, false
}

// Scale is the denominator frames of a fw×fh camera are decoded at, and why.
func (d *Decoder) Scale(fw, fh int) (int, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.scale(fw, fh)
}

func (d *Decoder) scale(fw, fh int) (int, string) {
	if !d.haveCached || fw != d.fw || fh != d.fh {
		d.denom, d.why = d.info.ChooseScale(fw, fh, d.tw, d.th, d.resize)
		d.fw, d.fh, d.haveCached = fw, fh, true
	}
	return d.denom, d.why
}

// Describe is a line for logs and `edged check`: the backend, the scale
// for a fw×fh camera and why.
func (d *Decoder) Describe(fw, fh int) string {
	den, why := d.Scale(fw, fh)
	return fmt.Sprintf("MJPEG decoded by %s, scale 1/%d (%s)", d.Backend(), den, why)
}

// Format is the format of decoded frames from a fw×fh camera.
func (d *Decoder) Format(fw, fh int, fps float64) sensors.Format {
	den, _ := d.Scale(fw, fh)
	return Format(fw, fh, den, fps)
}

// Format is the RGB24 format of a 1/den decode of a fw×fh image.
func Format(fw, fh, den int, fps float64) sensors.Format {
	w, h := jpeg.ScaledSize(fw, fh, den)
	f := sensors.Format{Width: w, Height: h, Pixel: sensors.RGB24, FPS: fps}
	if den > 1 {
		f.Downscale = den
	}
	return f
}

// Decode decodes src, a frame of the fw×fh camera, into dst and returns
// the decoded format and the bytes written. A frame of another size is
// jpeg.ErrCorrupt. Errors wrap jpeg.ErrCorrupt or jpeg.ErrShort.
func (d *Decoder) Decode(dst, src []byte, fw, fh int, fps float64) (sensors.Format, int, error) {
	d.mu.Lock()
	den, _ := d.scale(fw, fh)
	d.mu.Unlock()
	d.decMu.Lock()
	defer d.decMu.Unlock()
	if d.dec == nil {
		dec, err := jpeg.New(d.opts)
		if err != nil {
			return sensors.Format{}, 0, err
		}
		d.dec = dec
	}
	hd, err := d.dec.Header(src)
	if err != nil {
		return sensors.Format{}, 0, err
	}
	if hd.Width != fw || hd.Height != fh {
		return sensors.Format{}, 0, fmt.Errorf("%w: a %dx%d frame from a %dx%d source", jpeg.ErrCorrupt, hd.Width, hd.Height, fw, fh)
	}
	w, h, err := d.dec.Decode(dst, src, den)
	if err != nil {
		return sensors.Format{}, 0, err
	}
	return Format(fw, fh, den, fps), 3 * w * h, nil
}

// Close releases the library's decoder; the next Decode makes a new one
// (a source's Close, then Start again).
func (d *Decoder) Close() error {
	d.decMu.Lock()
	defer d.decMu.Unlock()
	if d.dec == nil {
		return nil
	}
	err := d.dec.Close()
	d.dec = nil
	return err
}

// Per pixel of a w×h frame, what a decode allocates besides its
// destination, at most: image/jpeg decodes a progressive 4:4:4 frame into
// int32 coefficients (12 bytes a pixel) and a YCbCr image (3), converts
// it into a full-size RGB24 image first when it scales (3), and copies
// the frame to insert Huffman tables; each frame's memory is garbage
// until the collector runs, so twice that. libjpeg-turbo keeps a
// progressive frame's 16-bit coefficients (6 bytes a pixel) and no more
// for baseline ones; nvJPEG decodes in the GPU's memory (a host staging
// buffer of the frame's size).
const (
	stdWorkPerPixel   = 2 * (12 + 3 + 3)
	turboWorkPerPixel = 6
)

// WorkBytes bounds the memory decoding one w×h frame allocates besides its
// destination (and the frame), for the memory check.
func (d *Decoder) WorkBytes(w, h int) int64 {
	px := int64(max(w, 0)) * int64(max(h, 0))
	switch d.info.Name {
	case jpeg.Std:
		return stdWorkPerPixel * px
	case jpeg.TurboJPEG:
		return turboWorkPerPixel * px
	}
	return 3 * px
}
