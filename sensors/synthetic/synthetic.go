package synthetic

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/internal/demoscene"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/internal/lifetime"
	"github.com/edged-dev/edged/sensors/internal/mjpeg"
	sjpeg "github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// Defaults applied to zero option fields.
const (
	DefaultWidth        = 640
	DefaultHeight       = 480
	DefaultPeriodFrames = 30
	DefaultJPEGQuality  = 85
)

// Options configures a synthetic camera. Zero fields take the defaults.
type Options struct {
	Name          string
	Width, Height int                 // default 640×480
	Pixel         sensors.PixelFormat // default YUYV
	FPS           float64             // frames per second; 0 = free-running
	Seed          uint64              // selects the square's start and velocity
	PeriodFrames  int                 // frames per background colour; default 30
	Square        int                 // side of the square in pixels; default min(Width,Height)/6, rounded down to even
	JPEGQuality   int                 // MJPEG only, 1..100; default 85
	// Encoded (MJPEG only) delivers the JPEG bytes, as a camera's buffers
	// hold them (Format().Pixel MJPEG; for recordings and decoder tests).
	// By default MJPEG frames are encoded and then decoded into the slot
	// like a V4L2 MJPEG camera's: RGB24, at the SetDecodeTarget scale.
	Encoded bool
	JPEG    sjpeg.Options // the decoder of MJPEG frames (package jpeg)
}

func (o Options) withDefaults() Options {
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
	if o.Pixel == 0 {
		o.Pixel = sensors.YUYV
	}
	if o.PeriodFrames == 0 {
		o.PeriodFrames = DefaultPeriodFrames
	}
	if o.Square == 0 {
		o.Square = min(o.Width, o.Height) / 6
	}
	o.Square &^= 1
	if o.Square < 2 {
		o.Square = 2
	}
	if o.JPEGQuality == 0 {
		o.JPEGQuality = DefaultJPEGQuality
	}
	return o
}

func (o Options) validate() error {
	f := sensors.Format{Width: o.Width, Height: o.Height, Pixel: o.Pixel}
	var errs []error
	if err := pixconv.Validate(f); err != nil {
		errs = append(errs, err)
	}
	if o.Width < 2 || o.Height < 2 {
		errs = append(errs, fmt.Errorf("size %dx%d: width and height must be at least 2", o.Width, o.Height))
	}
	if o.Square > min(o.Width, o.Height) {
		errs = append(errs, fmt.Errorf("square of %d pixels does not fit a %dx%d frame", o.Square, o.Width, o.Height))
	}
	if o.FPS < 0 {
		errs = append(errs, fmt.Errorf("fps %g: must be 0 (free-running) or positive", o.FPS))
	}
	if o.PeriodFrames < 0 {
		errs = append(errs, fmt.Errorf("period_frames %d: must be positive", o.PeriodFrames))
	}
	if o.JPEGQuality < 1 || o.JPEGQuality > 100 {
		errs = append(errs, fmt.Errorf("jpeg quality %d: must be 1..100", o.JPEGQuality))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("synthetic %q: %w", o.Name, err)
	}
	return nil
}

// Truth is what the synthetic camera drew in one frame.
type Truth struct {
	Seq        uint64
	Background int // index into demoscene.Palette
	// X, Y is the square's top-left pixel and Side its side: it covers
	// columns [X, X+Side) and rows [Y, Y+Side).
	X, Y, Side int
	// CenterX, CenterY is the square's centre in continuous pixel
	// coordinates (pixel i spans [i, i+1)): X + Side/2, Y + Side/2.
	CenterX, CenterY float64
}

// path is the square's bouncing motion: positions in units of 2 pixels.
type path struct {
	rx, ry   uint64 // last position along each axis (units)
	px, py   uint64 // phase at seq 0, in [0, 2r)
	vx, vy   uint64 // phase advance per frame, in [1, 2r)
	negX, nY bool
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func newPath(o Options) path {
	st := o.Seed
	var p path
	p.rx = uint64(o.Width-o.Square) / 2
	p.ry = uint64(o.Height-o.Square) / 2
	axis := func(r uint64) (ph, v uint64, neg bool) {
		a, b, c := splitmix(&st), splitmix(&st), splitmix(&st)
		if r == 0 {
			return 0, 0, false
		}
		lo, hi := max(1, r/60), max(1, r/30)
		return a % (2 * r), lo + b%(hi-lo+1), c&1 == 1
	}
	p.px, p.vx, p.negX = axis(p.rx)
	p.py, p.vy, p.nY = axis(p.ry)
	return p
}

// tri folds a phase in [0, 2r) into a bouncing position in [0, r].
func tri(phase, r uint64) uint64 {
	if phase > r {
		return 2*r - phase
	}
	return phase
}

func pos(phase0, v uint64, neg bool, r, seq uint64) uint64 {
	if r == 0 {
		return 0
	}
	n := 2 * r
	step := (v % n) * (seq % n) % n
	if neg {
		step = n - step
	}
	return tri((phase0+step)%n, r)
}

func (p path) at(o Options, seq uint64) Truth {
	x := int(2 * pos(p.px, p.vx, p.negX, p.rx, seq))
	y := int(2 * pos(p.py, p.vy, p.nY, p.ry, seq))
	s := o.Square
	return Truth{
		Seq:        seq,
		Background: int((seq / uint64(o.PeriodFrames)) % uint64(len(demoscene.Palette))),
		X:          x, Y: y, Side: s,
		CenterX: float64(x) + float64(s)/2,
		CenterY: float64(y) + float64(s)/2,
	}
}

// TruthAt is what a synthetic camera with options o draws in frame seq.
// It is a pure function; it applies the same defaults as New.
func TruthAt(o Options, seq uint64) Truth {
	o = o.withDefaults()
	return newPath(o).at(o, seq)
}

// Source is a synthetic camera. It implements sensors.Source.
type Source struct {
	opts   Options
	fmtMu  sync.Mutex // guards format (SetDecodeTarget changes it)
	format sensors.Format
	path   path
	mj     *mjpeg.Decoder // MJPEG frames delivered decoded
	enc    []byte         // the encoded frame before decoding
	period time.Duration

	// Pre-encoded lines: for packed formats line[c] is one line of colour
	// c; for NV12 it is the Y line followed by the CbCr line.
	bgLines [len(demoscene.Palette)][]byte
	sqLine  []byte
	rgba    *image.RGBA // MJPEG canvas
	jpw     sliceWriter
	jpo     jpeg.Options

	run    lifetime.Lifetime // Stop wakes a Next that holds mu
	pacing atomic.Bool       // Next waits for its frame's time (Pacing)

	mu      sync.Mutex // serialises Next, Start and the end of Close
	pool    sensors.SlotPool
	started bool
	next    time.Time
	seq     uint64
}

// New returns a synthetic camera; Start begins streaming.
func New(opts Options) (*Source, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Source{
		opts:   o,
		format: sensors.Format{Width: o.Width, Height: o.Height, Pixel: o.Pixel, FPS: o.FPS},
		path:   newPath(o),
	}
	if o.FPS > 0 {
		s.period = time.Duration(float64(time.Second) / o.FPS)
	}
	if o.Pixel == sensors.MJPEG {
		if !o.Encoded {
			mj, err := mjpeg.New(o.JPEG)
			if err != nil {
				return nil, fmt.Errorf("synthetic %q: %w", o.Name, err)
			}
			s.mj, s.enc = mj, make([]byte, s.format.FrameSize())
			s.format = mj.Format(o.Width, o.Height, o.FPS)
		}
		s.rgba = image.NewRGBA(image.Rect(0, 0, o.Width, o.Height))
		s.jpo.Quality = o.JPEGQuality
		for i, c := range demoscene.Palette {
			s.bgLines[i] = rgbaLine(c, o.Width)
		}
		s.sqLine = rgbaLine(demoscene.SquareColor, o.Square)
		return s, nil
	}
	for i, c := range demoscene.Palette {
		l, err := encodeLine(c, o)
		if err != nil {
			return nil, err
		}
		s.bgLines[i] = l
	}
	l, err := encodeLine(demoscene.SquareColor, o)
	if err != nil {
		return nil, err
	}
	s.sqLine = l
	return s, nil
}

func rgbaLine(c demoscene.RGB, w int) []byte {
	b := make([]byte, 4*w)
	for i := 0; i < w; i++ {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = c.R, c.G, c.B, 255
	}
	return b
}

// encodeLine encodes a two-row image of colour c and keeps its first line
// (and, for NV12, the chroma line).
func encodeLine(c demoscene.RGB, o Options) ([]byte, error) {
	rgb := make([]byte, 2*3*o.Width)
	for i := 0; i < len(rgb); i += 3 {
		rgb[i], rgb[i+1], rgb[i+2] = c.R, c.G, c.B
	}
	f := sensors.Format{Width: o.Width, Height: 2, Pixel: o.Pixel}
	enc := make([]byte, pixconv.RawSize(f))
	if _, err := pixconv.FromRGB24(enc, f, rgb, 3*o.Width); err != nil {
		return nil, fmt.Errorf("synthetic %q: %w", o.Name, err)
	}
	ls := o.Pixel.PackedLine(o.Width)
	if o.Pixel == sensors.NV12 {
		return append(enc[:ls:ls], enc[2*ls:3*ls]...), nil
	}
	return enc[:ls], nil
}

// Name implements sensors.Source.
func (s *Source) Name() string { return s.opts.Name }

// Format implements sensors.Source. Frames are packed (Stride 0). MJPEG
// frames are RGB24 unless Options.Encoded.
func (s *Source) Format() sensors.Format {
	s.fmtMu.Lock()
	defer s.fmtMu.Unlock()
	return s.format
}

// SetDecodeTarget: see v4l2.Source.SetDecodeTarget; "" unless MJPEG
// frames are decoded.
func (s *Source) SetDecodeTarget(w, h int, resize string) string {
	if s.mj == nil {
		return ""
	}
	s.mj.SetDecodeTarget(w, h, resize)
	s.fmtMu.Lock()
	s.format = s.mj.Format(s.opts.Width, s.opts.Height, s.opts.FPS)
	s.fmtMu.Unlock()
	return s.mj.Describe(s.opts.Width, s.opts.Height)
}

// SlotSize is the slot size frames need: Format().FrameSize(), or for
// decoded MJPEG the full-scale RGB24 frame whatever the decode target.
func (s *Source) SlotSize() int {
	if s.mj != nil {
		return s.opts.Width * s.opts.Height * 3
	}
	return s.Format().FrameSize()
}

// Options returns the effective options (defaults applied).
func (s *Source) Options() Options { return s.opts }

// Truth is what this source draws in frame seq.
func (s *Source) Truth(seq uint64) Truth { return s.path.at(s.opts, seq) }

// Start implements sensors.Source. Frames are drawn into slots of pool,
// which must hold at least Format().FrameSize() bytes. Seq continues
// across Close/Start cycles of the same Source.
func (s *Source) Start(ctx context.Context, pool sensors.SlotPool) error {
	if pool == nil {
		return fmt.Errorf("synthetic %q: Start without a slot pool", s.opts.Name)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("synthetic %q: already started", s.opts.Name)
	}
	s.pool = pool
	s.run.Begin()
	s.next = time.Time{}
	s.started = true
	return nil
}

// Next implements sensors.Source. It returns ctx.Err() when ctx ends and
// an error wrapping sensors.ErrClosed after Close.
func (s *Source) Next(ctx context.Context) (sensors.Frame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return sensors.Frame{}, fmt.Errorf("synthetic %q: %w", s.opts.Name, sensors.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return sensors.Frame{}, err
	}
	if err := s.tick(ctx); err != nil {
		return sensors.Frame{}, err
	}
	slot, err := s.pool.Get(s.run.Context(ctx))
	if err != nil {
		if s.run.Stopped() {
			return sensors.Frame{}, fmt.Errorf("synthetic %q: %w", s.opts.Name, sensors.ErrClosed)
		}
		if ctx.Err() != nil {
			return sensors.Frame{}, ctx.Err()
		}
		return sensors.Frame{}, fmt.Errorf("synthetic %q: leasing a frame slot: %w", s.opts.Name, err)
	}
	t := sensors.Now()
	format := s.Format()
	var n int
	if s.mj != nil {
		if n, err = s.drawJPEG(s.enc, s.path.at(s.opts, s.seq)); err == nil {
			format, n, err = s.mj.Decode(slot.Bytes(), s.enc[:n], s.opts.Width, s.opts.Height, s.opts.FPS)
			if err != nil {
				err = fmt.Errorf("synthetic %q: decoding MJPEG frame: %w", s.opts.Name, err)
			}
		}
	} else {
		n, err = s.draw(slot.Bytes(), s.seq)
	}
	if err != nil {
		slot.Release()
		return sensors.Frame{}, err
	}
	f := sensors.Frame{Seq: s.seq, TCapture: t, TReady: sensors.Now(), BytesUsed: n, Format: format, Slot: slot}
	if s.opts.Pixel == sensors.MJPEG {
		f.Flags = sensors.FlagCopied
	}
	s.seq++
	return f, nil
}

// tick waits for the next frame time on the monotonic clock. A consumer
// that falls behind by more than a period gets the next frame at once and
// the schedule restarts from there (no burst of catch-up frames).
func (s *Source) tick(ctx context.Context) error {
	if s.period == 0 {
		return nil
	}
	now := time.Now()
	if s.next.IsZero() || now.Sub(s.next) > s.period {
		s.next = now
	}
	s.pacing.Store(true)
	err := s.run.Wait(ctx, s.next.Sub(now))
	s.pacing.Store(false)
	switch {
	case errors.Is(err, lifetime.ErrStopped):
		return fmt.Errorf("synthetic %q: %w", s.opts.Name, sensors.ErrClosed)
	case err != nil:
		return err
	}
	s.next = s.next.Add(s.period)
	return nil
}

// WorkBytes is the memory the source allocates besides its frame slots,
// at most: with Encoded, the encoded frame and what decoding it takes.
func (s *Source) WorkBytes() int64 {
	if s.mj == nil {
		return 0
	}
	return int64(len(s.enc)) + s.mj.WorkBytes(s.opts.Width, s.opts.Height)
}

// Pacing implements sensors.Pacer: Next is waiting for its next frame's
// time at the configured rate.
func (s *Source) Pacing() bool { return s.pacing.Load() }

// Close implements sensors.Source: it wakes a blocked Next, waits for it
// to return and is idempotent. A closed source may be started again.
func (s *Source) Close() error {
	s.run.Stop() // wakes a Next blocked on the timer or the pool
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	s.run.End()
	s.pool = nil
	if s.mj != nil {
		s.mj.Close()
	}
	return nil
}

var errSlotSmall = errors.New("synthetic: frame slot too small")

// draw renders frame seq into buf and returns the bytes used.
func (s *Source) draw(buf []byte, seq uint64) (int, error) {
	tr := s.path.at(s.opts, seq)
	f := s.format
	if f.Pixel == sensors.MJPEG {
		return s.drawJPEG(buf, tr)
	}
	need := f.FrameSize()
	if len(buf) < need {
		return 0, fmt.Errorf("%w: %q needs %d bytes for %s, slot has %d: size the pool with Format().FrameSize()", errSlotSmall, s.opts.Name, need, f, len(buf))
	}
	bg := s.bgLines[tr.Background]
	w, h := f.Width, f.Height
	ls := f.LineBytes()
	bpp := ls / w // bytes per pixel of the first plane (1, 2 or 3)
	if f.Pixel == sensors.NV12 {
		bpp = 1
	}
	x0, x1 := tr.X*bpp, (tr.X+tr.Side)*bpp
	// Row with the square: background, then the square's run.
	for y := 0; y < h; y++ {
		row := buf[y*ls : y*ls+ls]
		copy(row, bg[:ls])
		if y >= tr.Y && y < tr.Y+tr.Side {
			copy(row[x0:x1], s.sqLine[x0:x1])
		}
	}
	if f.Pixel == sensors.NV12 {
		uv := buf[ls*h:]
		for j := 0; j < (h+1)/2; j++ {
			row := uv[j*ls : j*ls+ls]
			copy(row, bg[ls:])
			if 2*j >= tr.Y && 2*j < tr.Y+tr.Side {
				copy(row[tr.X:tr.X+tr.Side], s.sqLine[ls+tr.X:])
			}
		}
	}
	return need, nil
}

func (s *Source) drawJPEG(buf []byte, tr Truth) (int, error) {
	img := s.rgba
	bg := s.bgLines[tr.Background]
	for y := 0; y < s.opts.Height; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+4*s.opts.Width]
		copy(row, bg)
		if y >= tr.Y && y < tr.Y+tr.Side {
			copy(row[4*tr.X:], s.sqLine)
		}
	}
	s.jpw = sliceWriter{buf: buf}
	if err := jpeg.Encode(&s.jpw, img, &s.jpo); err != nil {
		return 0, fmt.Errorf("synthetic %q: encoding MJPEG frame: %w", s.opts.Name, err)
	}
	return s.jpw.n, nil
}

// sliceWriter writes into a fixed slice (the slot) and fails on overflow.
type sliceWriter struct {
	buf []byte
	n   int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, fmt.Errorf("%w: MJPEG frame exceeds %d bytes", errSlotSmall, len(w.buf))
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}
