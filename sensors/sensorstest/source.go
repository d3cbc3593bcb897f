package sensorstest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/edged-dev/edged/sensors"
)

// Step is one scripted outcome of Source.Next.
type Step struct {
	Data     []byte // copied into the leased slot; BytesUsed = len(Data)
	TCapture int64  // 0: sensors.Now() when delivered
	Flags    uint32
	SeqSkip  uint64 // frames "lost" before this one (a Seq gap)
	// Err, when set, is returned by Next instead of a frame (for example
	// an error wrapping sensors.ErrDeviceGone); no slot is leased.
	Err error
}

// Source is a scripted sensors.Source for tests of consumers. Frames are
// delivered in Push order into slots leased from the pool given to Start;
// Next waits while the script is empty.
type Source struct {
	name   string
	format sensors.Format
	// Strict makes Close fail when scripted steps were never consumed
	// (a playback that the consumer did not finish).
	Strict bool

	mu        sync.Mutex
	cond      chan struct{} // closed and replaced on every change
	steps     []Step
	startErrs []error
	pool      sensors.SlotPool
	started   bool
	seq       uint64
	starts    int
	closes    int
	delivered int
}

// NewSource returns a scripted source whose frames have format f.
func NewSource(name string, f sensors.Format) *Source {
	return &Source{name: name, format: f, cond: make(chan struct{})}
}

func (s *Source) changed() {
	close(s.cond)
	s.cond = make(chan struct{})
}

// Push appends steps to the script.
func (s *Source) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
	s.changed()
}

// FailStart makes the next len(errs) Starts fail with errs in order (for
// example with sensors.ErrNotFound, to test optional sources and
// reconnect loops).
func (s *Source) FailStart(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startErrs = append(s.startErrs, errs...)
}

// Counts reports how often Start succeeded, Close was called and frames
// were delivered.
func (s *Source) Counts() (starts, closes, delivered int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, s.closes, s.delivered
}

// Remaining is the number of steps not yet played.
func (s *Source) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Name implements sensors.Source.
func (s *Source) Name() string { return s.name }

// Format implements sensors.Source.
func (s *Source) Format() sensors.Format { return s.format }

// Start implements sensors.Source.
func (s *Source) Start(ctx context.Context, pool sensors.SlotPool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.startErrs) > 0 {
		err := s.startErrs[0]
		s.startErrs = s.startErrs[1:]
		return fmt.Errorf("sensorstest source %q: %w", s.name, err)
	}
	if s.started {
		return fmt.Errorf("sensorstest source %q: already started", s.name)
	}
	s.pool, s.started = pool, true
	s.starts++
	s.changed()
	return nil
}

// Next implements sensors.Source.
func (s *Source) Next(ctx context.Context) (sensors.Frame, error) {
	for {
		s.mu.Lock()
		if !s.started {
			s.mu.Unlock()
			return sensors.Frame{}, fmt.Errorf("sensorstest source %q: %w", s.name, sensors.ErrClosed)
		}
		if len(s.steps) > 0 {
			st := s.steps[0]
			s.steps = s.steps[1:]
			pool := s.pool
			if st.Err != nil {
				s.mu.Unlock()
				return sensors.Frame{}, st.Err
			}
			s.seq += st.SeqSkip
			seq := s.seq
			s.seq++
			s.mu.Unlock()
			slot, err := pool.Get(ctx)
			if err != nil {
				return sensors.Frame{}, err
			}
			if len(st.Data) > len(slot.Bytes()) {
				slot.Release()
				return sensors.Frame{}, fmt.Errorf("sensorstest source %q: %d-byte frame does not fit a %d-byte slot", s.name, len(st.Data), len(slot.Bytes()))
			}
			n := copy(slot.Bytes(), st.Data)
			t := st.TCapture
			if t == 0 {
				t = sensors.Now()
			}
			s.mu.Lock()
			s.delivered++
			s.mu.Unlock()
			return sensors.Frame{Seq: seq, TCapture: t, BytesUsed: n, Flags: st.Flags, Format: s.format, Slot: slot}, nil
		}
		wait := s.cond
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return sensors.Frame{}, ctx.Err()
		}
	}
}

// Close implements sensors.Source: it wakes a waiting Next and is
// idempotent. With Strict set it reports unplayed steps.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	s.closes++
	s.changed()
	if s.Strict && len(s.steps) > 0 {
		return fmt.Errorf("sensorstest source %q: closed with %d scripted steps unplayed", s.name, len(s.steps))
	}
	return nil
}

// SampleSource is a scripted sensors.SampleSource. Samples are delivered
// in Push order with Sensor, Seq and (when zero) TMono filled in.
type SampleSource struct {
	name string

	mu      sync.Mutex
	cond    chan struct{}
	items   []sampleItem
	started bool
	seq     uint64
}

type sampleItem struct {
	s   sensors.Sample
	err error
}

// NewSampleSource returns a scripted sample source.
func NewSampleSource(name string) *SampleSource {
	return &SampleSource{name: name, cond: make(chan struct{})}
}

// Push appends samples to the script.
func (s *SampleSource) Push(samples ...sensors.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range samples {
		s.items = append(s.items, sampleItem{s: x})
	}
	close(s.cond)
	s.cond = make(chan struct{})
}

// PushErr scripts an error (e.g. wrapping sensors.ErrDeviceGone).
func (s *SampleSource) PushErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, sampleItem{err: err})
	close(s.cond)
	s.cond = make(chan struct{})
}

// Name implements sensors.SampleSource.
func (s *SampleSource) Name() string { return s.name }

// Start implements sensors.SampleSource.
func (s *SampleSource) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("sensorstest: sample source already started")
	}
	s.started = true
	return ctx.Err()
}

// Next implements sensors.SampleSource.
func (s *SampleSource) Next(ctx context.Context) (sensors.Sample, error) {
	for {
		s.mu.Lock()
		if !s.started {
			s.mu.Unlock()
			return sensors.Sample{}, fmt.Errorf("sensorstest sample source %q: %w", s.name, sensors.ErrClosed)
		}
		if len(s.items) > 0 {
			it := s.items[0]
			s.items = s.items[1:]
			if it.err != nil {
				s.mu.Unlock()
				return sensors.Sample{}, it.err
			}
			x := it.s
			x.Sensor, x.Seq = s.name, s.seq
			s.seq++
			if x.TMono == 0 {
				x.TMono = sensors.Now()
			}
			s.mu.Unlock()
			return x, nil
		}
		wait := s.cond
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return sensors.Sample{}, ctx.Err()
		}
	}
}

// Close implements sensors.SampleSource.
func (s *SampleSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		s.started = false
		close(s.cond)
		s.cond = make(chan struct{})
	}
	return nil
}

var (
	_ sensors.Source       = (*Source)(nil)
	_ sensors.SampleSource = (*SampleSource)(nil)
	_ sensors.SlotPool     = (*Pool)(nil)
)
