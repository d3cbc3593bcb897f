package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/internal/regfile"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/internal/lifetime"
	"github.com/edged-dev/edged/sensors/internal/mjpeg"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// Options configures a replay source.
type Options struct {
	Name string
	// Path is a raw frame file or a folder of PNG/JPEG images.
	Path string
	// Pixel is the output format for image folders; default RGB24. Raw
	// files keep the format they were recorded in.
	Pixel sensors.PixelFormat
	// FPS > 0 plays at this fixed rate; 0 keeps the recorded pace (files)
	// or takes frames as fast as Next is called (folders).
	FPS float64
	// FreeRun ignores all pacing: every Next returns the next frame at once.
	FreeRun bool
	// Loop restarts at the first frame instead of returning ErrEOF.
	Loop bool
	// JPEG chooses the decoder of MJPEG files and .jpg images (default:
	// libjpeg-turbo, else image/jpeg; see package jpeg).
	JPEG jpeg.Options
}

// Source replays frames. It implements sensors.Source.
type Source struct {
	opts Options

	run    lifetime.Lifetime // Stop wakes a Next that holds mu
	pacing atomic.Bool       // Next waits for its frame's time (Pacing)

	mu      sync.Mutex
	started bool
	pool    sensors.SlotPool
	next    time.Time
	format  sensors.Format
	seq     uint64
	played  int // frames of the current pass

	// decoding: MJPEG files (at the decode target's scale) and .jpg images
	mjMu   sync.Mutex // guards the mj pointer for WorkBytes, which does not take mu
	mj     *mjpeg.Decoder
	mjOpen bool // mj decodes an MJPEG file
	target struct {
		w, h   int
		resize string
	}
	jbuf []byte // an MJPEG record before decoding

	// raw file
	file *os.File
	fr   *frameReader
	// pend is a record whose header was read but whose wait for its time
	// was cut short (a cancelled or closed Next): the next Next replays it
	// rather than reading its body as a header.
	pend    Record
	hasPend bool
	// image folder
	images []string
	pos    int
	rgb    []byte // decoded image scratch (RGB24)
	ibuf   []byte // the image file being decoded
}

// New returns a replay source; Start opens the file or folder.
func New(opts Options) (*Source, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("replay %q: path is empty: set a raw frame file or an image folder", opts.Name)
	}
	if opts.FPS < 0 {
		return nil, fmt.Errorf("replay %q: fps %g: must be 0 (recorded pace) or positive", opts.Name, opts.FPS)
	}
	if opts.Pixel == 0 {
		opts.Pixel = sensors.RGB24
	}
	if opts.Pixel == sensors.MJPEG {
		return nil, fmt.Errorf("replay %q: %w: image folders cannot be replayed as MJPEG; use RGB24 or a YUV format", opts.Name, sensors.ErrFormat)
	}
	return &Source{opts: opts}, nil
}

// Name implements sensors.Source.
func (s *Source) Name() string { return s.opts.Name }

// SetDecodeTarget: see v4l2.Source.SetDecodeTarget. It applies to raw
// files recorded as MJPEG (image folders decode at full size); the line
// it returns is "" until Start has found an MJPEG file.
func (s *Source) SetDecodeTarget(w, h int, resize string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target.w, s.target.h, s.target.resize = w, h, resize
	if s.mj == nil || !s.mjOpen {
		return ""
	}
	s.mj.SetDecodeTarget(w, h, resize)
	s.format = s.decodedFormat()
	return s.mj.Describe(s.fr.hdr.Format.Width, s.fr.hdr.Format.Height)
}

// DecodeLine names the MJPEG decoder, the scale and why, once Start has
// found an MJPEG file ("" before, and for other files).
func (s *Source) DecodeLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mj == nil || !s.mjOpen {
		return ""
	}
	return s.mj.Describe(s.fr.hdr.Format.Width, s.fr.hdr.Format.Height)
}

// decoder makes the JPEG decoder on first use.
func (s *Source) decoder() (*mjpeg.Decoder, error) {
	if s.mj == nil {
		mj, err := mjpeg.New(s.opts.JPEG)
		if err != nil {
			return nil, s.errorf("%w", err)
		}
		s.mjMu.Lock()
		s.mj = mj
		s.mjMu.Unlock()
	}
	return s.mj, nil
}

func (s *Source) decodedFormat() sensors.Format {
	h := s.fr.hdr.Format
	f := s.mj.Format(h.Width, h.Height, h.FPS)
	if s.opts.FPS > 0 {
		f.FPS = s.opts.FPS
	}
	return f
}

// Format implements sensors.Source; valid after Start.
func (s *Source) Format() sensors.Format {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.format
}

func (s *Source) errorf(format string, a ...any) error {
	return fmt.Errorf("replay %q: "+format, append([]any{s.opts.Name}, a...)...)
}

// Start implements sensors.Source. A missing path is sensors.ErrNotFound.
func (s *Source) Start(ctx context.Context, pool sensors.SlotPool) error {
	if pool == nil {
		return s.errorf("Start without a slot pool")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return s.errorf("already started")
	}
	st, err := os.Stat(s.opts.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s.errorf("%w: %s", sensors.ErrNotFound, s.opts.Path)
		}
		return s.errorf("%w", err)
	}
	if st.IsDir() {
		err = s.openFolder()
	} else {
		err = s.openFile()
	}
	if err != nil {
		return err
	}
	if s.opts.FPS > 0 {
		s.format.FPS = s.opts.FPS
	}
	if ps, ok := pool.(interface{ SlotSize() int }); ok && s.format.FrameSize() > ps.SlotSize() {
		s.closeFiles()
		if s.mj != nil {
			s.mj.Close()
		}
		return s.errorf("%w: %s: its %s frames of %d bytes do not fit the slots of %d bytes, which were sized for the recording as it was when the pipeline started",
			sensors.ErrFormat, s.opts.Path, s.format, s.format.FrameSize(), ps.SlotSize())
	}
	s.run.Begin()
	s.next, s.played, s.pool, s.started = time.Time{}, 0, pool, true
	return nil
}

func (s *Source) openFile() error {
	f, _, err := regfile.Open(s.opts.Path, regfile.NoLimit)
	if err != nil {
		return s.errorf("%w", err)
	}
	fr, err := newFrameReader(f)
	if err != nil {
		f.Close()
		return s.errorf("%s: %w", s.opts.Path, err)
	}
	if fr.max >= parallelMin {
		fr.fill = newFiller(fillWorkers())
	}
	s.file, s.fr, s.format = f, fr, fr.hdr.Format
	s.mjOpen = false
	if s.format.Pixel == sensors.MJPEG {
		mj, err := s.decoder()
		if err != nil {
			f.Close()
			s.file, s.fr = nil, nil
			return err
		}
		mj.SetDecodeTarget(s.target.w, s.target.h, s.target.resize)
		s.mjOpen, s.format = true, s.decodedFormat()
		if n := fr.hdr.Format.FrameSize(); len(s.jbuf) < n {
			s.jbuf = make([]byte, n)
		}
	}
	return nil
}

// fillWorkers is how many goroutines besides the caller read a large
// frame: half the cores, at most 7 (eight 512 KiB reads of a 4 MB frame),
// at least 1 where there are two cores.
func fillWorkers() int { return max(0, min(7, goruntime.GOMAXPROCS(0)/2)) }

func (s *Source) openFolder() error {
	imgs, err := listImages(s.opts.Path)
	if err != nil {
		return s.errorf("%w", err)
	}
	g, err := folderGeometry(imgs)
	if err != nil {
		return s.errorf("%w", err)
	}
	f := sensors.Format{Width: g.Width, Height: g.Height, Pixel: s.opts.Pixel}
	if err := pixconv.Validate(f); err != nil {
		return s.errorf("%s: %w", s.opts.Path, err)
	}
	s.images, s.pos, s.format = imgs, 0, f
	if f.Pixel != sensors.RGB24 && len(s.rgb) < 3*f.Width*f.Height {
		s.rgb = make([]byte, 3*f.Width*f.Height)
	}
	return nil
}

// listImages lists the *.png, *.jpg and *.jpeg files of a folder, sorted
// by name.
func listImages(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var imgs []string
	for _, e := range ents {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".png", ".jpg", ".jpeg":
			if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
				imgs = append(imgs, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("%w: no .png, .jpg or .jpeg files in %s", sensors.ErrNotFound, dir)
	}
	sort.Strings(imgs)
	return imgs, nil
}

// folderGeometry is the size of the first image (by name) whose header
// is usable and at most maxDim a side: every image of the folder must
// have it. Images before it are skipped when their turn comes, with the
// reason.
func folderGeometry(imgs []string) (imageHeader, error) {
	var first error
	for _, p := range imgs {
		h, err := readImageHeader(p)
		if err == nil && (h.Width > maxDim || h.Height > maxDim) {
			err = fmt.Errorf("%w: %s: %dx%d is larger than %d pixels a side", errImage, p, h.Width, h.Height, maxDim)
		}
		if err == nil {
			return h, nil
		}
		if first == nil {
			first = err
		}
	}
	return imageHeader{}, fmt.Errorf("%w: none of the %d images in %s can be replayed; the first: %w", sensors.ErrFormat, len(imgs), filepath.Dir(imgs[0]), first)
}

// ProbeFolder returns the format an image folder replays as (pixel 0:
// RGB24) without decoding anything: the size of its first usable image.
func ProbeFolder(dir string, pixel sensors.PixelFormat) (sensors.Format, error) {
	imgs, err := listImages(dir)
	if err != nil {
		return sensors.Format{}, fmt.Errorf("replay %s: %w", dir, err)
	}
	g, err := folderGeometry(imgs)
	if err != nil {
		return sensors.Format{}, fmt.Errorf("replay %s: %w", dir, err)
	}
	if pixel == 0 {
		pixel = sensors.RGB24
	}
	return sensors.Format{Width: g.Width, Height: g.Height, Pixel: pixel}, nil
}

// Next implements sensors.Source.
func (s *Source) Next(ctx context.Context) (sensors.Frame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return sensors.Frame{}, s.errorf("%w", sensors.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return sensors.Frame{}, err
	}
	slot, err := s.pool.Get(s.run.Context(ctx))
	if err != nil {
		return sensors.Frame{}, s.ended(ctx, s.errorf("leasing a frame slot: %w", err))
	}
	// Paced before the frame is read, so that its capture time is when
	// edged starts writing it and TReady when it is complete: the fill is
	// part of the latency a result reports.
	f, err := s.read(ctx, slot.Bytes())
	if err != nil {
		slot.Release()
		return sensors.Frame{}, err
	}
	f.Slot, f.Seq = slot, s.seq
	if f.Format == (sensors.Format{}) {
		f.Format = s.format
	}
	s.seq++
	s.played++
	return f, nil
}

func (s *Source) ended(ctx context.Context, err error) error {
	switch {
	case s.run.Stopped():
		return s.errorf("%w", sensors.ErrClosed)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

// read waits until the next frame is due, then fills dst with it and sets
// TCapture (when the fill started) and TReady (when it ended).
func (s *Source) read(ctx context.Context, dst []byte) (sensors.Frame, error) {
	if s.fr != nil {
		rec, err := s.pend, error(nil)
		if !s.hasPend {
			rec, err = s.fr.nextHeader(len(dst))
		}
		s.hasPend = false
		if err == io.EOF {
			if !s.opts.Loop || s.played == 0 {
				return sensors.Frame{}, s.errorf("%w: %s", sensors.ErrEOF, s.opts.Path)
			}
			if err := s.rewind(); err != nil {
				return sensors.Frame{}, err
			}
			rec, err = s.fr.nextHeader(len(dst))
			if err == nil {
				rec.DeltaNs = s.period()
			}
		}
		if err != nil {
			return sensors.Frame{}, s.errorf("%s: %w", s.opts.Path, err)
		}
		if err := s.pace(ctx, rec.DeltaNs); err != nil {
			s.pend, s.hasPend = rec, true
			return sensors.Frame{}, err
		}
		t := sensors.Now()
		if s.mjOpen {
			return s.readJPEG(rec, dst, t)
		}
		if err := s.fr.body(rec, dst); err != nil {
			return sensors.Frame{}, s.errorf("%s: %w", s.opts.Path, err)
		}
		return sensors.Frame{BytesUsed: rec.Length, Flags: rec.Flags, TCapture: t, TReady: sensors.Now()}, nil
	}
	if s.pos == len(s.images) {
		if !s.opts.Loop {
			return sensors.Frame{}, s.errorf("%w: %s", sensors.ErrEOF, s.opts.Path)
		}
		if s.played == 0 {
			// A whole pass skipped every image: an error, so that the
			// caller backs off and starts again (listing the folder anew).
			return sensors.Frame{}, s.errorf("%w: no image in %s could be replayed in a whole pass", sensors.ErrFormat, s.opts.Path)
		}
		s.pos, s.played = 0, 0
	}
	if err := s.pace(ctx, -1); err != nil {
		return sensors.Frame{}, err
	}
	path := s.images[s.pos]
	s.pos++
	t := sensors.Now()
	n, err := s.decode(path, dst)
	if err != nil {
		// One file: it may be damaged, replaced or gone; the next one is
		// tried at the next Next.
		return sensors.Frame{}, s.errorf("%w: %w", sensors.ErrSkipped, err)
	}
	return sensors.Frame{BytesUsed: n, Flags: sensors.FlagCopied, TCapture: t, TReady: sensors.Now()}, nil
}

// readJPEG reads an MJPEG record and decodes it into dst. A frame that
// does not decode (a camera's truncated or corrupt frame, recorded as it
// came) is delivered flagged sensors.FlagError, with no bytes, for the
// consumer to drop and count, as it would a camera's.
func (s *Source) readJPEG(rec Record, dst []byte, t int64) (sensors.Frame, error) {
	if err := s.fr.body(rec, s.jbuf); err != nil {
		return sensors.Frame{}, s.errorf("%s: %w", s.opts.Path, err)
	}
	h := s.fr.hdr.Format
	f, n, err := s.mj.Decode(dst, s.jbuf[:rec.Length], h.Width, h.Height, s.format.FPS)
	if err != nil {
		if errors.Is(err, jpeg.ErrShort) {
			return sensors.Frame{}, s.errorf("%w", err)
		}
		return sensors.Frame{Flags: rec.Flags | sensors.FlagError, TCapture: t, TReady: sensors.Now(), Format: s.format}, nil
	}
	return sensors.Frame{BytesUsed: n, Flags: rec.Flags, TCapture: t, TReady: sensors.Now(), Format: f}, nil
}

func (s *Source) period() int64 {
	if s.format.FPS > 0 {
		return int64(float64(time.Second) / s.format.FPS)
	}
	return 0
}

func (s *Source) rewind() error {
	if err := s.fr.reset(); err != nil {
		return s.errorf("%s: %w", s.opts.Path, err)
	}
	s.played = 0
	return nil
}

// decode decodes the image at path into dst in the source's format. The
// file is read whole (at most imageFileLimit), its header checked against
// the folder's size, and only then decoded from the same bytes, so the
// decoder never allocates for a size the folder does not have.
func (s *Source) decode(path string, dst []byte) (int, error) {
	w, h := s.format.Width, s.format.Height
	b, err := readImage(path, imageFileLimit(w, h), s.ibuf)
	s.ibuf = b[:0]
	if err != nil {
		return 0, err
	}
	hd, err := parseImageHeader(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if hd.Width != w || hd.Height != h {
		return 0, fmt.Errorf("%w: %s is a %dx%d %s; the folder's images are %dx%d (its first usable image), all must have one size", errImage, path, hd.Width, hd.Height, hd.Kind, w, h)
	}
	out := dst
	if s.format.Pixel != sensors.RGB24 {
		out = s.rgb
	}
	switch hd.Kind {
	case kindJPEG:
		mj, err := s.decoder()
		if err != nil {
			return 0, err
		}
		if _, _, err := mj.Decode(out, b, w, h, 0); err != nil {
			return 0, fmt.Errorf("%w: %s: %w", errImage, path, err)
		}
	default:
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %w", errImage, path, err)
		}
		if err := pixconv.ImageToRGB24(out, 3*w, img); err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	if s.format.Pixel == sensors.RGB24 {
		return 3 * w * h, nil
	}
	return pixconv.FromRGB24(dst, s.format, s.rgb, 3*w)
}

// maxGap bounds the wait for one frame: a recorded gap longer than a
// century (up to the 292 years of an INT64_MAX delta) is waited as one, so
// that no time arithmetic on it overflows.
const maxGap = 100 * 365 * 24 * time.Hour

// pace waits until the frame is due. delta is the recorded gap before the
// frame (-1: none recorded). However long the wait, it is by design, and
// Pacing says so meanwhile.
func (s *Source) pace(ctx context.Context, delta int64) error {
	if s.opts.FreeRun {
		return nil
	}
	gap := min(time.Duration(delta), maxGap)
	if s.opts.FPS > 0 {
		gap = time.Duration(float64(time.Second) / s.opts.FPS)
	} else if delta < 0 {
		return nil // folder without a rate: as fast as consumed
	}
	now, prev := time.Now(), s.next
	if s.next.IsZero() {
		s.next = now
	} else {
		s.next = s.next.Add(gap)
		if now.Sub(s.next) > max(gap, 10*time.Millisecond) {
			s.next = now // fell behind: do not burst
		}
	}
	s.pacing.Store(true)
	err := s.run.Wait(ctx, s.next.Sub(now))
	s.pacing.Store(false)
	if err != nil {
		s.next = prev // the frame is still due when Next comes back for it
	}
	if errors.Is(err, lifetime.ErrStopped) {
		return s.errorf("%w", sensors.ErrClosed)
	}
	return err
}

// WorkBytes is the memory the source allocates besides its frame slots,
// at most, for the recording or folder at Options.Path as it is now (0
// when it cannot be read: Start says why): for an MJPEG recording, a
// record's buffer and what decoding it takes; for a folder, the file
// read whole (imageFileLimit), the image image/png or the JPEG decoder
// makes of it (eight bytes a pixel, twice: the last frame's is garbage
// until the collector runs) and, for formats other than RGB24, an RGB24
// copy.
func (s *Source) WorkBytes() int64 {
	if st, err := os.Stat(s.opts.Path); err != nil {
		return 0
	} else if !st.IsDir() {
		h, err := readFileHeader(s.opts.Path)
		if err != nil || h.Format.Pixel != sensors.MJPEG {
			return 0
		}
		work, _ := s.decoderWork(h.Format.Width, h.Format.Height)
		return int64(h.Format.FrameSize()) + work
	}
	f, err := ProbeFolder(s.opts.Path, s.opts.Pixel)
	if err != nil {
		return 0
	}
	px := int64(f.Width) * int64(f.Height)
	n := imageFileLimit(f.Width, f.Height) + 2*8*px
	if f.Pixel != sensors.RGB24 {
		n += 3 * px
	}
	if work, ok := s.decoderWork(f.Width, f.Height); ok {
		n = max(n, imageFileLimit(f.Width, f.Height)+work+3*px)
	}
	return n
}

// decoderWork is what decoding a w×h JPEG frame takes with the decoder
// this source uses (made and closed here when Start has not made it yet:
// WorkBytes must not wait for a Next that holds mu).
func (s *Source) decoderWork(w, h int) (int64, bool) {
	s.mjMu.Lock()
	mj := s.mj
	s.mjMu.Unlock()
	if mj == nil {
		tmp, err := mjpeg.New(s.opts.JPEG)
		if err != nil {
			return 0, false
		}
		defer tmp.Close()
		mj = tmp
	}
	return mj.WorkBytes(w, h), true
}

// closeFiles closes the recording (or forgets the folder's list).
func (s *Source) closeFiles() error {
	var err error
	if s.file != nil {
		if s.fr.fill != nil {
			s.fr.fill.close()
		}
		err = s.file.Close()
		s.file, s.fr, s.hasPend = nil, nil, false
	}
	s.images = nil
	return err
}

// Pacing implements sensors.Pacer: Next is waiting for the recorded time
// (or the fixed rate) of its next frame, however far away it is.
func (s *Source) Pacing() bool { return s.pacing.Load() }

// Close implements sensors.Source. It wakes a blocked Next, waits for it
// and is idempotent; Start may follow and replays from the beginning
// (Seq continues).
func (s *Source) Close() error {
	s.run.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	s.run.End()
	s.pool = nil
	err := s.closeFiles()
	if s.mj != nil {
		s.mj.Close()
	}
	if err != nil {
		return s.errorf("closing %s: %w", s.opts.Path, err)
	}
	return nil
}
