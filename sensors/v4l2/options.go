package v4l2

import (
	"errors"
	"fmt"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
)

// ErrNotCapture means the device node is not a streaming video capture
// device (for example the metadata node a UVC camera also creates).
var ErrNotCapture = errors.New("v4l2: not a streaming video capture device")

// Memory modes.
const (
	MemoryAuto    = "auto"    // USERPTR into pool slots, MMAP + copy when refused
	MemoryUserptr = "userptr" // USERPTR only; fail when refused
	MemoryMmap    = "mmap"    // MMAP + one copy per frame
)

// Defaults applied to zero option fields.
const (
	DefaultBuffers      = 4
	DefaultRestartAfter = 3
	DefaultGiveUpAfter  = 10
	DefaultDevRoot      = "/dev"
)

// Options configures a V4L2 camera.
type Options struct {
	Name string
	// Device is a path (/dev/video0, /dev/v4l/by-id/usb-...-video-index0)
	// or a bare name looked up in <DevRoot>/v4l/by-id, <DevRoot>/v4l/by-path
	// and <DevRoot>, in that order. Symlinks are resolved at every Start.
	Device        string
	Width, Height int
	Pixel         sensors.PixelFormat // default YUYV
	FPS           float64             // requested rate; 0 keeps the driver's
	Buffers       int                 // V4L2 buffers; default 4
	Memory        string              // auto (default), userptr or mmap
	// PollTimeout is how long Next waits for a frame before counting a
	// timeout; default three frame periods, at least 200 ms (1 s when the
	// rate is unknown).
	PollTimeout time.Duration
	// RestartAfter consecutive timeouts restart streaming
	// (STREAMOFF/STREAMON); GiveUpAfter consecutive timeouts end Next with
	// ErrDeviceGone. Defaults 3 and 10.
	RestartAfter, GiveUpAfter int
	DevRoot                   string // default /dev; tests point it at a fixture tree
	// JPEG chooses the MJPEG decoder (default: libjpeg-turbo, else
	// image/jpeg with a warning; see package jpeg).
	JPEG jpeg.Options
}

func (o Options) withDefaults() Options {
	if o.Pixel == 0 {
		o.Pixel = sensors.YUYV
	}
	if o.Buffers == 0 {
		o.Buffers = DefaultBuffers
	}
	if o.Memory == "" {
		o.Memory = MemoryAuto
	}
	if o.RestartAfter == 0 {
		o.RestartAfter = DefaultRestartAfter
	}
	if o.GiveUpAfter == 0 {
		o.GiveUpAfter = DefaultGiveUpAfter
	}
	if o.DevRoot == "" {
		o.DevRoot = DefaultDevRoot
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.Device == "" {
		errs = append(errs, errors.New("device is empty: set a path such as /dev/v4l/by-id/usb-...-video-index0"))
	}
	if o.Width <= 0 || o.Height <= 0 {
		errs = append(errs, fmt.Errorf("size %dx%d: width and height must be positive", o.Width, o.Height))
	}
	if _, ok := map[sensors.PixelFormat]bool{sensors.YUYV: true, sensors.UYVY: true, sensors.NV12: true, sensors.GREY: true, sensors.RGB24: true, sensors.BGR24: true, sensors.MJPEG: true}[o.Pixel]; !ok {
		errs = append(errs, fmt.Errorf("%w: %s", sensors.ErrFormat, o.Pixel))
	}
	if o.FPS < 0 {
		errs = append(errs, fmt.Errorf("fps %g: must be 0 (driver default) or positive", o.FPS))
	}
	if o.Buffers < 1 || o.Buffers > 32 {
		errs = append(errs, fmt.Errorf("buffers %d: want 1..32", o.Buffers))
	}
	switch o.Memory {
	case MemoryAuto, MemoryUserptr, MemoryMmap:
	default:
		errs = append(errs, fmt.Errorf("memory %q: want auto, userptr or mmap", o.Memory))
	}
	if o.PollTimeout < 0 || o.RestartAfter < 1 || o.GiveUpAfter < o.RestartAfter {
		errs = append(errs, fmt.Errorf("poll timeout %v, restart after %d, give up after %d: need a non-negative timeout and 1 <= restart <= give up", o.PollTimeout, o.RestartAfter, o.GiveUpAfter))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("v4l2 camera %q: %w", o.Name, err)
	}
	return nil
}

// Stats counts what a Source has done since it was created.
type Stats struct {
	Mode       string // "userptr" or "mmap" (empty before the first Start)
	ModeReason string // why mmap was chosen
	Device     string // the node opened by the last Start (symlinks resolved)
	Starts     uint64
	Frames     uint64 // delivered
	Corrupt    uint64 // dropped: V4L2_BUF_FLAG_ERROR
	Short      uint64 // dropped: fewer bytes than the format needs
	Decode     uint64 // dropped: MJPEG that failed to decode (corrupt, truncated, wrong size)
	Timeouts   uint64 // polls that saw no frame within PollTimeout
	Restarts   uint64 // STREAMOFF/STREAMON after repeated timeouts
	Gone       uint64 // times the device went away while streaming
}

// SlotSizeHint is a slot size that fits frames of opts from drivers that
// pad lines to up to 256 bytes, rounded up to whole pages: size the frame
// pool with it before Start (the exact need, Format().FrameSize(), is only
// known once the driver has answered S_FMT; Start fails with the required
// size if a slot is too small).
func SlotSizeHint(opts Options) int {
	o := opts.withDefaults()
	f := sensors.Format{Width: o.Width, Height: o.Height, Pixel: o.Pixel}
	if o.Pixel == sensors.MJPEG {
		f.Pixel = sensors.RGB24 // decoded into the slot
	} else {
		f.Stride = (f.Pixel.PackedLine(o.Width) + 255) &^ 255
	}
	return (f.FrameSize() + 4095) &^ 4095
}
