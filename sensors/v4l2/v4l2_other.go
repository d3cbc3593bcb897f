//go:build !linux || !(amd64 || arm64)

package v4l2

import (
	"context"
	"fmt"
	"runtime"

	"github.com/edged-dev/edged/sensors"
)

// Source is a V4L2 camera; on this platform every Start fails.
type Source struct{ opts Options }

// New returns a source whose Start reports that V4L2 is unsupported here.
func New(opts Options) (*Source, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Source{opts: o}, nil
}

func (s *Source) unsupported() error {
	return fmt.Errorf("v4l2 camera %q: %w: V4L2 capture is built for linux/amd64 and linux/arm64, not %s/%s", s.opts.Name, sensors.ErrNotFound, runtime.GOOS, runtime.GOARCH)
}

// Name implements sensors.Source.
func (s *Source) Name() string { return s.opts.Name }

// Start implements sensors.Source.
func (s *Source) Start(context.Context, sensors.SlotPool) error { return s.unsupported() }

// Format implements sensors.Source.
func (s *Source) Format() sensors.Format { return sensors.Format{} }

// Mode reports the memory mode; always empty here.
func (s *Source) Mode() string { return "" }

// Stats returns zero counters.
func (s *Source) Stats() Stats { return Stats{} }

// Next implements sensors.Source.
func (s *Source) Next(context.Context) (sensors.Frame, error) {
	return sensors.Frame{}, fmt.Errorf("v4l2 camera %q: %w", s.opts.Name, sensors.ErrClosed)
}

// Close implements sensors.Source.
func (s *Source) Close() error { return nil }

// SetDecodeTarget does nothing on this platform.
func (s *Source) SetDecodeTarget(int, int, string) string { return "" }

// DeviceInfo is what Probe reports about a camera.
type DeviceInfo struct {
	Node, Driver, Card, BusInfo string
	Formats                     Offers
}

// Probe is unsupported on this platform.
func Probe(opts Options) (DeviceInfo, error) {
	return DeviceInfo{}, (&Source{opts: opts}).unsupported()
}
