package rtsp

import (
	"sync"

	"github.com/edged-dev/edged/sensors"
)

// maxLead is how far before its arrival a frame's mapped capture time may
// lie, and maxLag how far after it (a sender report that took longer to
// arrive than the frame: the time is then the arrival); a mapping further
// off is not believed.
const (
	maxLead = 2_000_000_000
	maxLag  = 20_000_000
)

// clock maps a stream's RTP timestamps onto CLOCK_MONOTONIC through the
// camera's RTCP sender reports: a report says which RTP timestamp the
// camera's clock read when it sent it, and its arrival says when that was
// here. RTCP and RTP may arrive on different goroutines (UDP).
type clock struct {
	mu   sync.Mutex
	have bool
	rtp  uint32 // the last report's RTP timestamp
	mono int64  // its arrival
	ntp  uint64 // its NTP timestamp (for receiver reports)
	rate int64  // RTP clock rate (90 kHz for video)
}

// report takes a sender report's RTP and NTP timestamps, arrived at now.
func (c *clock) report(rtp uint32, ntp uint64, now int64) {
	c.mu.Lock()
	c.have, c.rtp, c.ntp, c.mono = true, rtp, ntp, now
	c.mu.Unlock()
}

// last returns the last report's NTP timestamp and arrival (0, 0 before
// one).
func (c *clock) last() (ntp uint64, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.have {
		return 0, 0
	}
	return c.ntp, c.mono
}

// capture is the capture time of a frame with RTP timestamp ts whose first
// packet arrived at arrival, and the clock it comes from.
func (c *clock) capture(ts uint32, arrival int64) (int64, sensors.CaptureClock) {
	c.mu.Lock()
	have, rtp, mono, rate := c.have, c.rtp, c.mono, c.rate
	c.mu.Unlock()
	if !have || rate <= 0 {
		return arrival, sensors.ClockArrival
	}
	d := int64(int32(ts - rtp)) // the camera's ticks from its report to the frame
	t := mono + d*1_000_000_000/rate
	if t > arrival+maxLag || t < arrival-maxLead {
		return arrival, sensors.ClockArrival
	}
	return min(t, arrival), sensors.ClockSenderReport
}
