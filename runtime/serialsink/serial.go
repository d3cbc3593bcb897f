package serialsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.bug.st/serial"
	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/runtime/stream"
)

// Serial errors.
var (
	// ErrStalled means one write took far longer than the baud rate needs
	// (peer not reading, flow control held, wedged adapter).
	ErrStalled = errors.New("stream: serial write stalled")
)

// Serial defaults.
const (
	DefaultBaud          = 115200
	DefaultQueue         = 64
	DefaultMaxFrameBytes = 1024
	DefaultStallFactor   = 4
	DefaultStallSlack    = 500 * time.Millisecond
	DefaultBackoffMin    = 100 * time.Millisecond
	DefaultBackoffMax    = 5 * time.Second
	DefaultFlushTimeout  = 2 * time.Second
)

// SerialOptions configures a Serial sink. Zero values mean the defaults.
type Options struct {
	// Name is the sink's name, used in messages.
	Name string
	// Device is the port's path. Use a stable name (/dev/serial/by-id/…
	// or a udev symlink): the sink reopens it by this path after an unplug.
	Device string
	// Baud (default 115200), DataBits (5–8, default 8), Parity ("none"
	// (default), "odd", "even", "mark", "space") and StopBits (1 or 2,
	// default 1).
	Baud     int
	DataBits int
	Parity   string
	StopBits int
	// Format is "cobs-cbor" (default: COBS(CBOR ‖ CRC-32C) ‖ 0x00) or
	// "ndjson" (one JSON line per record, for bring-up with a terminal).
	Format string
	// QueueLen is the number of records waiting for the port (default 64);
	// when full the oldest is dropped (a seq gap for the receiver).
	QueueLen int
	// MaxFrameBytes bounds one frame on the wire (default 1024, the
	// configuration's max_frame_bytes default). Larger results are
	// summarised (raw tensor data dropped, then outputs and sensors),
	// never cut mid-frame.
	MaxFrameBytes int
	// DTR and RTS, if set, are driven after each open. Ports without modem
	// lines (ptys, some adapters) answer ENOTTY, which is ignored.
	DTR, RTS *bool
	// A write of n bytes that takes longer than
	// StallFactor × n / (bytes per second at Baud) + StallSlack marks the
	// link stalled (defaults 4 and 500ms).
	StallFactor float64
	StallSlack  time.Duration
	// Reopen backoff, doubled per failed attempt, each delay drawn from
	// its upper half (internal/backoff; defaults 100ms and 5s).
	BackoffMin, BackoffMax time.Duration
	// FlushTimeout bounds how long Close keeps writing queued frames
	// (default 2s).
	FlushTimeout time.Duration
	// OnEvent, if set, is told when the port opens, fails to open, is lost
	// or stalls (for logs). It is called from the sink's goroutine and must
	// not block or call back into the sink.
	OnEvent func(Event)
}

// SerialEventKind says what happened to the port.
type EventKind uint8

// Serial event kinds.
const (
	Opened EventKind = iota + 1
	OpenFailed
	Lost    // a write failed (unplugged, hang-up)
	Stalled // a write took too long; the port was closed and is reopened
)

func (k EventKind) String() string {
	switch k {
	case Opened:
		return "opened"
	case OpenFailed:
		return "open_failed"
	case Lost:
		return "lost"
	case Stalled:
		return "stalled"
	}
	return "unknown"
}

// SerialEvent reports a change of the port's state.
type Event struct {
	Kind   EventKind
	Device string
	Err    error
	// Retry is the delay before the next open attempt (OpenFailed, Lost,
	// Stalled).
	Retry time.Duration
}

// SerialStats are a serial sink's counters since it was created.
type Stats struct {
	Up          bool   // the port is open
	Published   uint64 // records given to Publish
	Sent        uint64 // frames written completely
	BytesSent   uint64
	Dropped     uint64 // records dropped from the queue (full) or too large
	Summarised  uint64 // records shrunk to fit MaxFrameBytes
	Oversize    uint64 // records that could not be made to fit (dropped)
	Reconnects  uint64 // successful opens after the first
	OpenErrors  uint64
	WriteErrors uint64
	Stalls      uint64
	Queued      int  // frames waiting now
	Abandoned   bool // a stalled writer is still blocked in the kernel
}

// sframe is one encoded frame waiting for the port.
type sframe struct{ b []byte }

// Serial is a sink that writes records to a serial port. Publish encodes
// into a bounded queue; one writer goroutine drains it to the port.
type Sink struct {
	opts  Options
	mode  serial.Mode
	ndj   bool    // NDJSON format
	bps   float64 // bytes per second at the configured line settings
	delim []byte  // sent after each open

	mu      sync.Mutex // queue, free list, scratch, seq, closed
	q       []*sframe
	head, n int
	free    []*sframe
	made    int
	scratch []byte
	seq     uint64
	closed  bool

	wake    chan struct{} // something was queued
	stop    chan struct{} // Close was called
	runDone chan struct{} // the supervisor ended

	closeOnce sync.Once
	flushBy   atomic.Int64
	up        atomic.Bool
	abandoned atomic.Bool

	published, sent, bytesSent, dropped atomic.Uint64
	summarised, oversize                atomic.Uint64
	reconnects, openErrors, writeErrors atomic.Uint64
	stalls                              atomic.Uint64

	open func(path string, mode *serial.Mode) (serial.Port, error)
}

// NewSerial checks the options and starts the sink's goroutine, which
// opens the port (retrying with backoff while it is missing) and writes
// what is published. Close it to stop.
func New(opts Options) (*Sink, error) {
	s, err := newSink(opts)
	if err != nil {
		return nil, err
	}
	go s.supervise()
	return s, nil
}

func newSink(opts Options) (*Sink, error) {
	name := opts.Name
	if name == "" {
		name = opts.Device
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("stream: serial sink %q: "+format, append([]any{name}, a...)...)
	}
	if opts.Device == "" {
		return nil, bad("no device (set device, preferably a /dev/serial/by-id/ path)")
	}
	if opts.Baud == 0 {
		opts.Baud = DefaultBaud
	}
	if opts.Baud < 0 {
		return nil, bad("baud %d must be positive", opts.Baud)
	}
	if opts.DataBits == 0 {
		opts.DataBits = 8
	}
	if opts.DataBits < 5 || opts.DataBits > 8 {
		return nil, bad("data_bits %d (use 5, 6, 7 or 8)", opts.DataBits)
	}
	mode := serial.Mode{BaudRate: opts.Baud, DataBits: opts.DataBits}
	parityBits := 1
	switch opts.Parity {
	case "", "none":
		mode.Parity, parityBits = serial.NoParity, 0
	case "odd":
		mode.Parity = serial.OddParity
	case "even":
		mode.Parity = serial.EvenParity
	case "mark":
		mode.Parity = serial.MarkParity
	case "space":
		mode.Parity = serial.SpaceParity
	default:
		return nil, bad("parity %q (use none, odd, even, mark or space)", opts.Parity)
	}
	switch opts.StopBits {
	case 0, 1:
		opts.StopBits, mode.StopBits = 1, serial.OneStopBit
	case 2:
		mode.StopBits = serial.TwoStopBits
	default:
		return nil, bad("stop_bits %d (use 1 or 2)", opts.StopBits)
	}
	s := &Sink{opts: opts, mode: mode, wake: make(chan struct{}, 1), stop: make(chan struct{}), runDone: make(chan struct{}), open: serial.Open}
	switch opts.Format {
	case "", "cobs-cbor":
		s.delim = []byte{0}
	case "ndjson":
		s.ndj, s.delim = true, []byte{'\n'}
	default:
		return nil, bad("format %q (use \"cobs-cbor\" or \"ndjson\")", opts.Format)
	}
	if s.opts.QueueLen <= 0 {
		s.opts.QueueLen = DefaultQueue
	}
	if s.opts.MaxFrameBytes <= 0 {
		s.opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if s.opts.MaxFrameBytes < 256 {
		return nil, bad("max_frame_bytes %d is too small for a status record (at least 256)", s.opts.MaxFrameBytes)
	}
	if s.opts.StallFactor <= 0 {
		s.opts.StallFactor = DefaultStallFactor
	}
	if s.opts.StallSlack <= 0 {
		s.opts.StallSlack = DefaultStallSlack
	}
	if s.opts.BackoffMin <= 0 {
		s.opts.BackoffMin = DefaultBackoffMin
	}
	if s.opts.BackoffMax < s.opts.BackoffMin {
		s.opts.BackoffMax = max(DefaultBackoffMax, s.opts.BackoffMin)
	}
	if s.opts.FlushTimeout <= 0 {
		s.opts.FlushTimeout = DefaultFlushTimeout
	}
	bits := 1 + opts.DataBits + parityBits + opts.StopBits
	s.bps = float64(opts.Baud) / float64(bits)
	s.q = make([]*sframe, s.opts.QueueLen)
	return s, nil
}

// Publish encodes r into the queue, dropping the oldest queued frame when
// full. It never waits for the port, keeps no reference to r and
// allocates nothing in steady state.
func (s *Sink) Publish(r *stream.Record) {
	if r == nil || r.Kind < stream.KindResult || r.Kind > stream.KindError {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.published.Add(1)
	s.seq++
	var summarised, fitted bool
	s.scratch, summarised, fitted = stream.AppendSerialPayload(s.scratch[:0], r, s.seq, s.ndj, s.opts.MaxFrameBytes)
	if !fitted {
		s.oversize.Add(1)
		s.dropped.Add(1)
		return
	}
	if summarised {
		s.summarised.Add(1)
	}
	f := s.takeFrame()
	if s.ndj {
		f.b = append(f.b[:0], s.scratch...)
	} else {
		f.b = stream.FrameSerial(f.b[:0], s.scratch)
	}
	s.q[(s.head+s.n)%len(s.q)] = f
	s.n++
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// takeFrame returns a frame buffer for the next record: the oldest queued
// one when the queue is full (dropping it), else a free one, else a new one.
// At most QueueLen+2 exist: the queue, the writer's and an abandoned
// writer's. s.mu is held.
func (s *Sink) takeFrame() *sframe {
	if s.n == len(s.q) {
		f := s.q[s.head]
		s.q[s.head] = nil
		s.head = (s.head + 1) % len(s.q)
		s.n--
		s.dropped.Add(1)
		return f
	}
	if n := len(s.free); n > 0 {
		f := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		return f
	}
	s.made++
	return &sframe{b: make([]byte, 0, 256)}
}

func (s *Sink) popFrame() *sframe {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return nil
	}
	f := s.q[s.head]
	s.q[s.head] = nil
	s.head = (s.head + 1) % len(s.q)
	s.n--
	return f
}

func (s *Sink) putFrame(f *sframe) {
	s.mu.Lock()
	s.free = append(s.free, f)
	s.mu.Unlock()
}

func (s *Sink) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	return Stats{
		Up: s.up.Load(), Published: s.published.Load(), Sent: s.sent.Load(), BytesSent: s.bytesSent.Load(),
		Dropped: s.dropped.Load(), Summarised: s.summarised.Load(), Oversize: s.oversize.Load(),
		Reconnects: s.reconnects.Load(), OpenErrors: s.openErrors.Load(), WriteErrors: s.writeErrors.Load(),
		Stalls: s.stalls.Load(), Queued: s.queued(), Abandoned: s.abandoned.Load(),
	}
}

// Run waits until ctx is done, then closes the sink (flushing what is
// queued, within FlushTimeout) and returns nil.
func (s *Sink) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.runDone:
	}
	return s.Close()
}

// Close stops accepting records, writes what is queued if the port is up
// (within FlushTimeout), closes the port and waits for the sink's
// goroutine. A writer abandoned in a stalled write(2) is the one goroutine
// it cannot wait for: it holds one frame and exits when the kernel
// returns. Close is idempotent.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		s.flushBy.Store(time.Now().Add(s.opts.FlushTimeout).UnixNano())
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
	})
	<-s.runDone
	return nil
}

func (s *Sink) event(ev Event) {
	ev.Device = s.opts.Device
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(ev)
	}
}

// sleep waits d or until Close; false means Close.
func (s *Sink) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.stop:
		return false
	}
}

// supervise owns the port: open, write until it fails or stalls, reopen.
func (s *Sink) supervise() {
	defer close(s.runDone)
	var abandoned <-chan struct{} // a stalled writer still blocked in write(2)
	opened := false
	// A failed open and a port that fails soon after it opened both back
	// off, up to BackoffMax: a port that opens and fails at once cannot
	// spin.
	retry := backoff.Retry{Policy: backoff.Policy{Min: s.opts.BackoffMin, Max: s.opts.BackoffMax, Reset: backoff.Restart.Reset}}
	for {
		if abandoned != nil {
			// Never open the port again while a write on the old one may
			// still complete: at most one writer is ever abandoned.
			select {
			case <-abandoned:
				abandoned = nil
				s.abandoned.Store(false)
			case <-s.stop:
				return
			}
		}
		select {
		case <-s.stop:
			return
		default:
		}
		p, err := s.openPort()
		if err != nil {
			s.openErrors.Add(1)
			d := retry.Failed()
			s.event(Event{Kind: OpenFailed, Err: err, Retry: d})
			if !s.sleep(d) {
				return
			}
			continue
		}
		if opened {
			s.reconnects.Add(1)
		}
		opened = true
		retry.Started()
		s.up.Store(true)
		s.event(Event{Kind: Opened})
		stuck, err, stopped := s.serve(p)
		s.up.Store(false)
		if stopped && err == nil {
			return
		}
		kind := Lost
		if stuck != nil {
			abandoned = stuck
			s.abandoned.Store(true)
			s.stalls.Add(1)
			kind = Stalled
		} else {
			s.writeErrors.Add(1)
		}
		if stopped {
			s.event(Event{Kind: kind, Err: err})
			return
		}
		// A port that served a while is retried from the shortest delay
		// (never at once); one that failed soon after it opened, later
		// each time.
		d := retry.Ended()
		if d == 0 {
			d = retry.Policy.Delay(0)
		}
		s.event(Event{Kind: kind, Err: err, Retry: d})
		if !s.sleep(d) {
			return
		}
	}
}

// ProbeSerial opens the port of opts as the sink does (the same line
// settings, DTR and RTS) and closes it again: edged check's probe.
func Probe(opts Options) error {
	s, err := newSink(opts)
	if err != nil {
		return err
	}
	p, err := s.openPort()
	if err != nil {
		return err
	}
	return p.Close()
}

func (s *Sink) openPort() (serial.Port, error) {
	mode := s.mode
	p, err := s.open(s.opts.Device, &mode)
	if err != nil {
		return nil, fmt.Errorf("stream: serial sink %q: opening %s: %w", s.opts.Name, s.opts.Device, err)
	}
	lines := []struct {
		want *bool
		set  func(bool) error
		name string
	}{{s.opts.DTR, p.SetDTR, "DTR"}, {s.opts.RTS, p.SetRTS, "RTS"}}
	for _, l := range lines {
		if l.want == nil {
			continue
		}
		if err := l.set(*l.want); err != nil && !errors.Is(err, syscall.ENOTTY) && !errors.Is(err, syscall.EINVAL) {
			p.Close()
			return nil, fmt.Errorf("stream: serial sink %q: setting %s on %s: %w", s.opts.Name, l.name, s.opts.Device, err)
		}
	}
	return p, nil
}

// Writer states: the stall timer and the writer race to leave "writing".
const (
	wIdle int32 = iota
	wWriting
	wStalled
)

// serve runs a writer on p until a write fails (err), a write stalls
// (stuck: closed when the abandoned writer finally returns) or Close
// (stopped). p is closed when it returns.
func (s *Sink) serve(p serial.Port) (stuck <-chan struct{}, err error, stopped bool) {
	w := &serialWriter{s: s, p: p, errc: make(chan error, 1), stalled: make(chan struct{}, 1),
		done: make(chan struct{}), quit: make(chan struct{})}
	w.timer = time.AfterFunc(time.Hour, w.onStall)
	w.timer.Stop()
	go w.loop()

	select {
	case err = <-w.errc:
		<-w.done
		p.Close()
		return nil, err, false
	case <-w.stalled:
		p.Close() // does not interrupt the write; the writer is abandoned
		return w.done, ErrStalled, false
	case <-s.stop:
	}
	// Closing: let the writer drain the queue, bounded by the flush deadline.
	close(w.quit)
	t := time.NewTimer(time.Until(time.Unix(0, s.flushBy.Load())))
	defer t.Stop()
	select {
	case <-w.done:
		p.Close()
		select {
		case err = <-w.errc:
		default:
		}
		return nil, err, true
	case <-w.stalled:
		p.Close()
		return w.done, ErrStalled, true
	case <-t.C:
		if w.state.CompareAndSwap(wWriting, wStalled) || w.state.CompareAndSwap(wIdle, wStalled) {
			p.Close()
			return w.done, fmt.Errorf("%w: flush deadline passed", ErrStalled), true
		}
		<-w.done // it finished just now
		p.Close()
		return nil, nil, true
	}
}

type serialWriter struct {
	s       *Sink
	p       serial.Port
	state   atomic.Int32
	timer   *time.Timer
	errc    chan error
	stalled chan struct{}
	done    chan struct{}
	quit    chan struct{} // drain the queue, then exit
}

func (w *serialWriter) onStall() {
	if w.state.CompareAndSwap(wWriting, wStalled) {
		w.stalled <- struct{}{}
	}
}

func (w *serialWriter) loop() {
	defer close(w.done)
	s := w.s
	if err := w.write(s.delim); err != nil {
		w.fail(err)
		return
	}
	for {
		f := s.popFrame()
		if f == nil {
			select {
			case <-s.wake:
				continue
			case <-w.quit:
				if s.queued() > 0 {
					continue
				}
				return
			}
		}
		n := len(f.b)
		err := w.write(f.b)
		s.putFrame(f) // Publish may reuse it from here on
		if err != nil {
			w.fail(err)
			return
		}
		s.sent.Add(1)
		s.bytesSent.Add(uint64(n))
	}
}

var errAbandoned = errors.New("abandoned")

// write writes b completely, under the stall timer.
func (w *serialWriter) write(b []byte) error {
	if !w.state.CompareAndSwap(wIdle, wWriting) {
		return errAbandoned
	}
	limit := time.Duration(w.s.opts.StallFactor*float64(len(b))/w.s.bps*float64(time.Second)) + w.s.opts.StallSlack
	w.timer.Reset(limit)
	var err error
	for len(b) > 0 {
		var n int
		n, err = w.p.Write(b)
		b = b[n:]
		if err != nil && !errors.Is(err, syscall.EINTR) && !errors.Is(err, syscall.EAGAIN) {
			break
		}
		err = nil
	}
	w.timer.Stop()
	if !w.state.CompareAndSwap(wWriting, wIdle) {
		return errAbandoned // the port was closed under us; write nothing more
	}
	if err != nil {
		return fmt.Errorf("stream: serial sink %q: writing to %s: %w", w.s.opts.Name, w.s.opts.Device, err)
	}
	return nil
}

func (w *serialWriter) fail(err error) {
	if errors.Is(err, errAbandoned) {
		return
	}
	w.errc <- err
}

// OpenSerialReader opens a serial port for reading a sink's output (edged
// tail -serial): 8N1 at baud, raw. Read blocks until data arrives and
// returns io.EOF once the port is closed or hung up (the other end of a
// pty closed, a USB adapter unplugged: the kernel reports those as EIO,
// ENXIO or ENODEV, or as an empty read, depending on timing); Close wakes
// it.
func OpenReader(device string, baud int) (io.ReadCloser, error) {
	if baud <= 0 {
		baud = DefaultBaud
	}
	p, err := serial.Open(device, &serial.Mode{BaudRate: baud, DataBits: 8})
	if err != nil {
		return nil, fmt.Errorf("stream: opening %s: %w (check the path, and that this user may open it, e.g. is in group dialout)", device, err)
	}
	return serialReader{p}, nil
}

type serialReader struct{ p serial.Port }

func (r serialReader) Read(b []byte) (int, error) {
	for {
		n, err := r.p.Read(b)
		if err != nil {
			if isHangup(err) {
				return n, io.EOF
			}
			return n, err
		}
		if n > 0 || len(b) == 0 {
			return n, nil
		}
		// (0, nil) is the library's read timeout; none is set, but be safe.
	}
}

func (r serialReader) Close() error { return r.p.Close() }

// isHangup reports whether a read error from a serial port means the line
// is gone (closed here, hung up, unplugged) rather than a fault.
func isHangup(err error) bool {
	var pe *serial.PortError
	return errors.As(err, &pe) && pe.Code() == serial.PortClosed ||
		errors.Is(err, unix.EIO) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV)
}
