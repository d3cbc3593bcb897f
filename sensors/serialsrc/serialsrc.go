package serialsrc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.bug.st/serial"

	"github.com/edged-dev/edged/sensors"
)

// Protocols.
const (
	NMEA = "nmea"
	CSV  = "csv"
	COBS = "cobs"
)

// Defaults applied to zero option fields.
const (
	DefaultBaud        = 115200
	DefaultMaxLine     = 256
	DefaultQueue       = 256
	DefaultReadTimeout = time.Second
)

// Options configures a serial sensor.
type Options struct {
	Name     string
	Device   string // path, preferably a stable name (/dev/serial/by-id/...)
	Baud     int    // default 115200
	Protocol string // "nmea", "csv" or "cobs"
	// Columns names the values of a CSV line or COBS packet, in order
	// (e.g. ax, ay, az, gx, gy, gz); required for csv and cobs.
	Columns []string
	// Kind labels csv and cobs samples (Sample.Kind); default "imu".
	Kind string
	// MaxLine bounds one line or encoded packet in bytes; longer input is
	// dropped up to the next delimiter. Default 256 (NMEA allows 82).
	MaxLine int
	// Queue bounds the samples waiting for Next; when full the oldest is
	// dropped and counted. Default 256.
	Queue int
	// ReadTimeout is how long one read waits before counting an idle
	// period; default 1s.
	ReadTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Baud == 0 {
		o.Baud = DefaultBaud
	}
	if o.MaxLine == 0 {
		o.MaxLine = DefaultMaxLine
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Kind == "" {
		o.Kind = "imu"
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.Device == "" {
		errs = append(errs, errors.New("device is empty: set the serial port path, e.g. /dev/serial/by-id/usb-...-if00-port0"))
	}
	switch o.Protocol {
	case NMEA:
	case CSV, COBS:
		if len(o.Columns) == 0 || len(o.Columns) > sensors.MaxSampleValues {
			errs = append(errs, fmt.Errorf("protocol %q needs 1 to %d column names, got %d", o.Protocol, sensors.MaxSampleValues, len(o.Columns)))
		}
	default:
		errs = append(errs, fmt.Errorf("protocol %q: want nmea, csv or cobs", o.Protocol))
	}
	if o.Baud < 0 || o.MaxLine < 16 || o.Queue < 1 || o.ReadTimeout < 0 {
		errs = append(errs, fmt.Errorf("baud %d, max line %d, queue %d, read timeout %v: baud must be positive, max line at least 16, queue at least 1", o.Baud, o.MaxLine, o.Queue, o.ReadTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("serial sensor %q: %w", o.Name, err)
	}
	return nil
}

// Stats counts what a Source has seen since it was created.
type Stats struct {
	Starts     uint64 // successful Starts
	Bytes      uint64 // bytes read
	Parsed     uint64 // samples produced
	Checksum   uint64 // NMEA checksum or packet CRC mismatches
	Malformed  uint64 // lines or packets that could not be parsed
	Ignored    uint64 // well-formed input without a sample (other NMEA sentences, headers)
	Resyncs    uint64 // times bytes were skipped to find the start of a sentence
	Oversize   uint64 // lines or packets longer than MaxLine, dropped
	Dropped    uint64 // samples dropped because the consumer lagged
	IdleReads  uint64 // reads that timed out with no data
	DeviceGone uint64 // times the device went away while open
}

type stats struct {
	starts, bytes, parsed, checksum, malformed, ignored, resyncs, oversize, dropped, idle, gone atomic.Uint64
}

// port is the part of serial.Port the source uses.
type port interface {
	Read(p []byte) (int, error)
	SetReadTimeout(t time.Duration) error
	ResetInputBuffer() error
	Close() error
}

// openPort is swappable so unit tests can inject a port.
var openPort = func(path string, baud int) (port, error) {
	return serial.Open(path, &serial.Mode{BaudRate: baud})
}

// Source is a serial sensor. It implements sensors.SampleSource.
type Source struct {
	opts  Options
	names []string
	st    stats

	mu      sync.Mutex
	started bool
	port    port
	samples chan sensors.Sample
	done    chan struct{} // closed when the reader exits
	closing atomic.Bool
	readErr error // set by the reader before done is closed
	seq     uint64
}

// New returns a serial sensor; Start opens the port.
func New(opts Options) (*Source, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Source{opts: o, names: append([]string(nil), o.Columns...)}, nil
}

// Name implements sensors.SampleSource.
func (s *Source) Name() string { return s.opts.Name }

// Stats returns the counters.
func (s *Source) Stats() Stats {
	return Stats{
		Starts: s.st.starts.Load(), Bytes: s.st.bytes.Load(), Parsed: s.st.parsed.Load(),
		Checksum: s.st.checksum.Load(), Malformed: s.st.malformed.Load(), Ignored: s.st.ignored.Load(),
		Resyncs: s.st.resyncs.Load(), Oversize: s.st.oversize.Load(), Dropped: s.st.dropped.Load(),
		IdleReads: s.st.idle.Load(), DeviceGone: s.st.gone.Load(),
	}
}

// Start implements sensors.SampleSource: it opens the configured path
// (following symlinks at this moment, so a replugged adapter behind a
// by-id name is found again), discards stale input and starts the reader.
// A missing device is an error wrapping sensors.ErrNotFound.
func (s *Source) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("serial sensor %q: already started", s.opts.Name)
	}
	p, err := openPort(s.opts.Device, s.opts.Baud)
	if err != nil {
		return s.openError(err)
	}
	_ = p.ResetInputBuffer() // best effort: a pty may refuse
	if err := p.SetReadTimeout(s.opts.ReadTimeout); err != nil {
		p.Close()
		return fmt.Errorf("serial sensor %q: %s: setting read timeout: %w", s.opts.Name, s.opts.Device, err)
	}
	s.port = p
	s.samples = make(chan sensors.Sample, s.opts.Queue)
	s.done = make(chan struct{})
	s.readErr = nil
	s.closing.Store(false)
	s.started = true
	s.st.starts.Add(1)
	go s.read(p, s.samples, s.done)
	return nil
}

func (s *Source) openError(err error) error {
	dev := s.opts.Device
	if target, e := filepath.EvalSymlinks(dev); e == nil && target != dev {
		dev = fmt.Sprintf("%s (-> %s)", dev, target)
	}
	var pe *serial.PortError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("serial sensor %q: %w: %s does not exist; check the cable and the path (ls -l /dev/serial/by-id): %w", s.opts.Name, sensors.ErrNotFound, dev, err)
	case errors.As(err, &pe) && pe.Code() == serial.PermissionDenied:
		return fmt.Errorf("serial sensor %q: %s: permission denied; add the service user to group dialout: %w", s.opts.Name, dev, err)
	case errors.As(err, &pe) && pe.Code() == serial.PortBusy:
		return fmt.Errorf("serial sensor %q: %s: port busy; another process (ModemManager, a console getty) has it open: %w", s.opts.Name, dev, err)
	}
	return fmt.Errorf("serial sensor %q: opening %s: %w", s.opts.Name, dev, err)
}

// Next implements sensors.SampleSource. Samples already received are
// delivered before a device-gone error.
func (s *Source) Next(ctx context.Context) (sensors.Sample, error) {
	s.mu.Lock()
	started, samples, done := s.started, s.samples, s.done
	s.mu.Unlock()
	if !started {
		return sensors.Sample{}, fmt.Errorf("serial sensor %q: %w", s.opts.Name, sensors.ErrClosed)
	}
	select {
	case x := <-samples:
		return x, nil
	default:
	}
	select {
	case x := <-samples:
		return x, nil
	case <-done:
		select {
		case x := <-samples:
			return x, nil
		default:
		}
		return sensors.Sample{}, s.readErr
	case <-ctx.Done():
		return sensors.Sample{}, ctx.Err()
	}
}

// Close implements sensors.SampleSource: it closes the port, which wakes
// the reader, and waits for the reader to exit. It is idempotent; a closed
// source may be started again.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.closing.Store(true)
	err := s.port.Close()
	<-s.done
	s.started = false
	s.port = nil
	if err != nil {
		return fmt.Errorf("serial sensor %q: closing %s: %w", s.opts.Name, s.opts.Device, err)
	}
	return nil
}

// read is the reader goroutine, owned by the Source: it exits when the
// port fails or is closed, after setting readErr and closing done.
func (s *Source) read(p port, out chan sensors.Sample, done chan struct{}) {
	defer close(done)
	fr := newFramer(s.opts.Protocol, s.opts.MaxLine, &s.st.oversize)
	scratch := make([]byte, s.opts.MaxLine)
	buf := make([]byte, 4096)
	for {
		n, err := p.Read(buf)
		if n > 0 {
			s.st.bytes.Add(uint64(n))
			now := sensors.Now()
			data := buf[:n]
			for {
				frame, rest, ok := fr.next(data)
				data = rest
				if !ok {
					break
				}
				s.handle(frame, scratch, now, out)
			}
		}
		if err != nil {
			if s.closing.Load() {
				s.readErr = fmt.Errorf("serial sensor %q: %w", s.opts.Name, sensors.ErrClosed)
			} else {
				s.st.gone.Add(1)
				s.readErr = fmt.Errorf("serial sensor %q: %w: %s: %w; it will be reopened by path", s.opts.Name, sensors.ErrDeviceGone, s.opts.Device, err)
			}
			return
		}
		if n == 0 {
			// go.bug.st/serial returns (0, nil) when the read timeout
			// expires: the line is idle, not broken.
			s.st.idle.Add(1)
		}
	}
}

// handle parses one frame and queues the sample.
func (s *Source) handle(frame, scratch []byte, now int64, out chan sensors.Sample) {
	var x sensors.Sample
	var err error
	switch s.opts.Protocol {
	case NMEA:
		// Line noise before a sentence: parse from the last '$'.
		if i := lastIndex(frame, '$'); i > 0 {
			s.st.resyncs.Add(1)
			frame = frame[i:]
		} else if i < 0 {
			if len(trimSpace(frame)) > 0 {
				s.st.malformed.Add(1)
			}
			return
		}
		err = ParseNMEA(trimSpace(frame), &x)
	case CSV:
		err = ParseCSV(frame, s.names, &x)
		x.Kind = s.opts.Kind
	case COBS:
		if len(frame) == 0 {
			return // back-to-back delimiters: an idle marker, not an error
		}
		err = ParsePacket(frame, scratch, s.names, &x)
		x.Kind = s.opts.Kind
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrIgnored):
		s.st.ignored.Add(1)
		return
	case errors.Is(err, ErrChecksum):
		s.st.checksum.Add(1)
		return
	default:
		s.st.malformed.Add(1)
		return
	}
	x.Sensor, x.Seq, x.TMono = s.opts.Name, s.seq, now
	s.seq++
	s.st.parsed.Add(1)
	select {
	case out <- x:
		return
	default:
	}
	// Full: drop the oldest (the consumer may race us for it; either way
	// one slot frees up for the newest sample).
	select {
	case <-out:
		s.st.dropped.Add(1)
	default:
	}
	select {
	case out <- x:
	default:
		s.st.dropped.Add(1)
	}
}

func lastIndex(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// String describes the source for logs.
func (s *Source) String() string {
	return fmt.Sprintf("%s (%s %s, %s)", s.opts.Name, s.opts.Protocol, s.opts.Device, strings.Join(s.opts.Columns, ","))
}
