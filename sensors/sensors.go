package sensors

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Errors shared by sources.
var (
	// ErrClosed is returned by a closed source.
	ErrClosed = errors.New("sensors: source closed")
	// ErrDeviceGone means the device disappeared (unplugged, ENODEV, hang-up);
	// the caller should Close the source and Start it again later.
	ErrDeviceGone = errors.New("sensors: device gone")
	// ErrNotFound means the configured device does not exist (yet).
	ErrNotFound = errors.New("sensors: device not found")
	// ErrFormat means the device cannot deliver the requested format.
	ErrFormat = errors.New("sensors: unsupported format")
	// ErrEOF means a finite source (replay without looping) has no more frames.
	ErrEOF = errors.New("sensors: end of stream")
	// ErrSkipped from Next means one frame could not be used and was
	// skipped (a replayed image that is damaged, of another size or of a
	// kind edged does not decode): the error names it, and the source goes
	// on; call Next again.
	ErrSkipped = errors.New("sensors: frame skipped")
	// ErrGeometry from Start or Next means the source's frames no longer
	// fit the slots of the pool it was started with (a network camera
	// switched to a larger resolution mid-stream): the caller closes the
	// source, makes a pool of slots of the size its SlotSize method now
	// reports, and starts it again. Frames of a new size that still fit
	// are simply delivered: each Frame carries its own Format.
	ErrGeometry = errors.New("sensors: frames outgrew their slots")
)

// Slot is a leased frame buffer. Release returns it to its pool.
type Slot interface {
	Bytes() []byte
	Release()
}

// SlotPool hands out frame buffers. Get blocks until a slot is free or ctx
// is done.
//
// A pool that also has a method SlotSize() int (the bytes of each slot)
// lets a source whose frame size is only known once it starts (a
// recording, replaced since the pool was made) refuse at Start frames the
// slots cannot hold, instead of failing at every Next.
type SlotPool interface {
	Get(ctx context.Context) (Slot, error)
}

// Source is a camera-like producer of frames.
//
// Start opens the device and prepares streaming; Next blocks for the next
// frame; Close stops streaming, releases every slot the source still holds,
// wakes a blocked Next and is idempotent. After ErrDeviceGone the caller
// closes the source and may Start it again, which re-opens and re-initialises
// the device from scratch.
type Source interface {
	Name() string
	Start(ctx context.Context, pool SlotPool) error
	// Format is the negotiated format; valid after Start.
	Format() Format
	// Next returns the next frame. The caller owns the frame's slot and
	// must Release it.
	Next(ctx context.Context) (Frame, error)
	Close() error
}

// A Pacer is a Source whose Next waits by design: for the time its next
// frame is due (a recorded pace, a frame rate) or for a camera's next
// frame, in a wait that ends by itself. Pacing reports whether Next is in
// such a wait now; it is safe to call from any goroutine while Next runs.
// A consumer that watches for stuck sources (the watchdog) counts it as
// progress, however long the wait: a recording may pause for an hour.
type Pacer interface {
	Pacing() bool
}

// Frame flags.
const (
	FlagError  uint32 = 1 << iota // device flagged the buffer as corrupt
	FlagShort                     // fewer bytes than the format needs
	FlagCopied                    // data was copied into the slot (MMAP fallback, decoding)
)

// CaptureClock says where a frame's TCapture comes from.
type CaptureClock uint8

// The capture clocks.
const (
	// ClockLocal: the device's own timestamp on CLOCK_MONOTONIC (V4L2's
	// buffer time), or edged's clock when it made the frame (synthetic,
	// replay).
	ClockLocal CaptureClock = iota
	// ClockSenderReport: a network camera's sampling time, from the RTP
	// timestamp and the camera's last RTCP sender report, mapped onto
	// CLOCK_MONOTONIC at the report's arrival.
	ClockSenderReport
	// ClockArrival: when the frame's first packet arrived (a network
	// camera that has sent no sender report yet).
	ClockArrival
)

func (c CaptureClock) String() string {
	switch c {
	case ClockSenderReport:
		return "sender_report"
	case ClockArrival:
		return "arrival"
	}
	return "local"
}

// Frame is one captured image in a leased slot.
type Frame struct {
	Seq      uint64 // per-source sequence number, starting at 0 for the first frame
	TCapture int64  // capture time, CLOCK_MONOTONIC nanoseconds
	// TReady is when the frame was complete in its slot and handed over
	// (CLOCK_MONOTONIC ns): for frames edged writes itself (synthetic,
	// replay) TReady − TCapture is the time it took; for a camera, the
	// driver's delivery after its timestamp. 0 means TCapture.
	TReady    int64
	BytesUsed int // valid bytes at the start of Slot.Bytes()
	Flags     uint32
	Format    Format
	Slot      Slot
	// Clock says where TCapture comes from (ClockLocal for every source
	// but network cameras).
	Clock CaptureClock
}

// Data is the frame's valid bytes; nil when the slot's memory is not the
// host's (device memory a GPU decoder wrote: a CPU consumer copies it out).
func (f *Frame) Data() []byte {
	b := f.Slot.Bytes()
	if b == nil {
		return nil
	}
	return b[:f.BytesUsed]
}

// Format describes frames.
type Format struct {
	Width, Height int
	Pixel         PixelFormat
	Stride        int     // bytes per line of the first plane; 0 means packed
	FPS           float64 // nominal frame rate; 0 means free-running
	// Downscale > 1 means the frame is the camera's image decoded at
	// 1/Downscale (a DCT-scaled MJPEG decode, Width and Height rounded up):
	// frame pixel x is camera pixel x*Downscale. 0 or 1: full resolution.
	Downscale int
}

// LineBytes is the stride, or the packed line size when Stride is 0.
func (f Format) LineBytes() int {
	if f.Stride > 0 {
		return f.Stride
	}
	return f.Pixel.PackedLine(f.Width)
}

// FrameSize is the number of bytes one frame needs (MJPEG: an upper bound).
func (f Format) FrameSize() int {
	line := f.LineBytes()
	switch f.Pixel {
	case NV12:
		return line*f.Height + line*((f.Height+1)/2)
	case MJPEG:
		// Compressed frames are at most the size of the decoded RGB frame
		// in practice; the slot must also hold the decoded RGB24 image.
		return f.Width * f.Height * 3
	}
	return line * f.Height
}

func (f Format) String() string {
	s := fmt.Sprintf("%dx%d %s", f.Width, f.Height, f.Pixel)
	if f.FPS > 0 {
		s += fmt.Sprintf(" @%gfps", f.FPS)
	}
	if f.Downscale > 1 {
		s += fmt.Sprintf(" (decoded at 1/%d)", f.Downscale)
	}
	return s
}

// PixelFormat is a V4L2 fourcc.
type PixelFormat uint32

func fourcc(a, b, c, d byte) PixelFormat {
	return PixelFormat(uint32(a) | uint32(b)<<8 | uint32(c)<<16 | uint32(d)<<24)
}

// Pixel formats supported end to end.
var (
	YUYV  = fourcc('Y', 'U', 'Y', 'V')
	UYVY  = fourcc('U', 'Y', 'V', 'Y')
	NV12  = fourcc('N', 'V', '1', '2')
	GREY  = fourcc('G', 'R', 'E', 'Y')
	RGB24 = fourcc('R', 'G', 'B', '3')
	BGR24 = fourcc('B', 'G', 'R', '3')
	MJPEG = fourcc('M', 'J', 'P', 'G')
)

var pixelNames = map[PixelFormat]string{
	YUYV: "YUYV", UYVY: "UYVY", NV12: "NV12", GREY: "GREY", RGB24: "RGB24", BGR24: "BGR24", MJPEG: "MJPEG",
}

// PixelFormats lists the supported formats in a stable order.
func PixelFormats() []PixelFormat { return []PixelFormat{YUYV, UYVY, NV12, GREY, RGB24, BGR24, MJPEG} }

func (p PixelFormat) String() string {
	if n, ok := pixelNames[p]; ok {
		return n
	}
	b := []byte{byte(p), byte(p >> 8), byte(p >> 16), byte(p >> 24)}
	return fmt.Sprintf("fourcc(%q)", b)
}

// ParsePixelFormat accepts the names used in configuration files.
func ParsePixelFormat(s string) (PixelFormat, error) {
	for p, n := range pixelNames {
		if n == s {
			return p, nil
		}
	}
	switch s {
	case "RGB3":
		return RGB24, nil
	case "BGR3":
		return BGR24, nil
	case "MJPG":
		return MJPEG, nil
	}
	return 0, fmt.Errorf("%w: pixel format %q (want YUYV, UYVY, NV12, GREY, RGB24, BGR24 or MJPEG)", ErrFormat, s)
}

// PackedLine is the number of bytes in one line of width pixels of the
// first plane.
func (p PixelFormat) PackedLine(width int) int {
	switch p {
	case YUYV, UYVY:
		return width * 2
	case NV12, GREY:
		return width
	case RGB24, BGR24, MJPEG:
		return width * 3
	}
	return width * 4
}

// Now returns CLOCK_MONOTONIC in nanoseconds, the clock of every timestamp
// in this package.
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// MaxSampleValues bounds the numeric fields of one sample.
const MaxSampleValues = 16

// Sample is one timestamped reading of a serial sensor (an NMEA sentence, a
// CSV line, a COBS packet). It is a plain value: copying it allocates nothing.
type Sample struct {
	Sensor string // configured source name
	Seq    uint64 // per-sensor sequence number
	TMono  int64  // reception time, CLOCK_MONOTONIC nanoseconds
	Kind   string // e.g. "gga", "rmc", "imu"
	// Names labels Values[:N]; it points at a table shared by all samples
	// of one kind and must not be modified.
	Names  []string
	Values [MaxSampleValues]float64
	N      int
}

// SampleSource is a producer of samples (a serial IMU or GPS). Start opens
// the device; Next blocks for the next sample; Close wakes a blocked Next and
// is idempotent. ErrDeviceGone has the same meaning as for Source.
type SampleSource interface {
	Name() string
	Start(ctx context.Context) error
	Next(ctx context.Context) (Sample, error)
	Close() error
}
