package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/rtsp"
)

// The network camera kind (kind = "rtsp") as the binary wires it: the
// source built from its keys (sensors/rtsp/keys.go checks them), the
// decoder chosen (rtspdecoder.go) and its edged check probe; its metrics
// and its STATUS= note are sensors/rtsp's.

// defaultRTSPSlot is the frame slot of a network camera whose stream could
// not be probed before its pipeline started: 1080p as NV12. A stream that
// turns out larger ends its session (source_down with the sizes) and the
// pipeline makes its pool again for it (runtime/regrow.go).
var defaultRTSPSlot = sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.NV12}.FrameSize()

// rtspCamera is a network camera of the daemon.
type rtspCamera struct {
	*rtsp.Source
	timeout time.Duration

	once   sync.Once
	slot   int
	logged string // the stream and decoder last logged
}

// newRTSPCamera builds a network camera from its configuration; it
// connects to nothing.
func newRTSPCamera(sc *config.Source, c *config.Config) (sensors.Source, error) {
	dec, err := newDecoder(sc, c)
	if err != nil {
		return nil, err
	}
	o := rtsp.Options{Name: sc.Name, URL: sc.URL, Username: sc.Username, Transport: sc.Transport,
		Timeout: sc.Timeout.Duration, Decoder: dec}
	if sc.PasswordFile != "" {
		b, err := c.ReadNamed(sc.PasswordFile, config.MaxPasswordFileBytes)
		if err != nil {
			return nil, fmt.Errorf("source %q: password_file: %w", sc.Name, err)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
	}
	src, err := rtsp.New(o)
	if err != nil {
		return nil, err
	}
	return &rtspCamera{Source: src, timeout: o.Timeout}, nil
}

// SlotSize is what a frame slot must hold (runtime looks for it before the
// pipeline's pool is made): the stream's frames, probed once when no Start
// learnt them yet, else defaultRTSPSlot.
func (s *rtspCamera) SlotSize() int {
	if n := s.Source.SlotSize(); n > 0 {
		return n
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*s.timeout)
		defer cancel()
		if _, err := s.Probe(ctx); err == nil {
			s.slot = s.Source.SlotSize()
		}
	})
	if s.slot > 0 {
		return s.slot
	}
	return defaultRTSPSlot
}

// Start implements sensors.Source: refused credentials are the
// configuration's to fix (exit 78 at start, like check's verdict); every
// other failure is the camera's or the network's, retried.
func (s *rtspCamera) Start(ctx context.Context, pool sensors.SlotPool) error {
	err := credentials(s.Source.Start(ctx, pool))
	if err == nil {
		s.logDecoder()
	}
	return err
}

func credentials(err error) error {
	if errors.Is(err, rtsp.ErrUnauthorized) && !errors.Is(err, config.ErrInvalid) {
		return fmt.Errorf("%w: %w (username and password_file)", config.ErrInvalid, err)
	}
	return err
}

// checkRTSP is edged check's probe of a network camera: it connects as run
// does (DESCRIBE, SETUP, PLAY), reads the codec and size from the stream
// and says which decoder will serve it.
func checkRTSP(ctx context.Context, sc *config.Source, c *config.Config) (what string, err error) {
	src, err := newRTSPCamera(sc, c)
	if err != nil {
		return "", err
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*sc.Timeout.Duration)
	defer cancel()
	info, err := src.(*rtspCamera).Probe(ctx)
	if err != nil {
		return "", credentials(err)
	}
	line, ok := decoderChoice(sc, c, info.Codec)
	what = fmt.Sprintf("%s: %s %dx%d over %s; %s", rtsp.Redact(sc.URL), info.Codec, info.Format.Width, info.Format.Height, info.Transport, line)
	if info.Note != "" {
		what += "; " + info.Note
	}
	if !ok {
		return "", fmt.Errorf("%s", what)
	}
	return what, nil
}
