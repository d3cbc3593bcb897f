package config

import (
	"fmt"
	"math"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/rtsp"
)

// The [[source]] tables: each kind's defaults and the checks of its keys
// (a network camera's are in rtsp.go).

// defaults fills a [[source]] table by its kind.
func (s *Source) defaults() {
	switch s.Kind {
	case "v4l2", "synthetic", "replay":
		s.localCameraDefaults()
	case rtsp.Kind:
		s.rtspDefaults()
	case "serial":
		s.serialSensorDefaults()
	}
}

// localCameraDefaults fills a V4L2, synthetic or replay camera's keys.
func (s *Source) localCameraDefaults() {
	if s.Buffers == 0 {
		s.Buffers = DefaultBuffers
	}
	if s.Kind != "replay" {
		def(&s.Format, "YUYV")
	}
	if s.Kind == "synthetic" && s.Period == 0 {
		s.Period = DefaultPeriod
	}
	if s.Kind == "v4l2" {
		def(&s.IO, "auto")
	}
}

// serialSensorDefaults fills a serial sensor's keys.
func (s *Source) serialSensorDefaults() {
	if s.Baud == 0 {
		s.Baud = DefaultBaud
	}
	def(&s.Protocol, "nmea")
	if s.RingSize == 0 {
		s.RingSize = DefaultRing
	}
}

func (c *Config) checkSource(k *checker, i int) {
	s := &c.Sources[i]
	at := func(key string) string { return fmt.Sprintf("source[%d].%s", i, key) }
	switch s.Kind {
	case "v4l2", "synthetic", "replay":
		checkLocalCamera(k, s, at)
	case "serial":
		checkSerialSensor(k, s, at)
	case rtsp.Kind:
		c.checkRTSP(k, s, at)
	case "":
		k.add(fmt.Sprintf("source[%d]", i), "missing kind (\"v4l2\", \"synthetic\", \"replay\", \"rtsp\" or \"serial\")")
	default:
		k.add(at("kind"), "%q is not one of \"v4l2\", \"synthetic\", \"replay\", \"rtsp\", \"serial\"", s.Kind)
	}
}

// checkLocalCamera checks a V4L2, synthetic or replay camera's keys; at
// names them.
func checkLocalCamera(k *checker, s *Source, at func(string) string) {
	if s.Kind == "v4l2" && s.Device == "" {
		k.add(at("device"), "missing: a V4L2 source needs device = \"/dev/videoN\" or a stable /dev/v4l/by-id/... path")
	}
	if s.Kind == "replay" && s.Path == "" {
		k.add(at("path"), "missing: a replay source needs path = a recording file or an image folder")
	}
	if s.Kind != "replay" || s.Width != 0 || s.Height != 0 {
		bad := func(n int) bool { return n <= 0 || n > 16384 }
		switch key := "width"; {
		case s.Width == 0 && s.Height == 0:
			k.add(at("width"), "missing: a %s source needs width and height (the frame size in pixels)", s.Kind)
		case bad(s.Width) || bad(s.Height):
			if !bad(s.Width) {
				key = "height"
			}
			k.add(at(key), "width and height must be between 1 and 16384 (got %dx%d)", s.Width, s.Height)
		}
	}
	if s.Format != "" {
		if _, err := sensors.ParsePixelFormat(s.Format); err != nil {
			k.add(at("format"), "%q is not one of \"YUYV\", \"UYVY\", \"NV12\", \"GREY\", \"RGB24\", \"BGR24\", \"MJPEG\"", s.Format)
		}
	}
	if s.FPS < 0 || s.FPS > 1000 || math.IsNaN(s.FPS) {
		zero := map[string]string{
			"synthetic": "as fast as the pipeline takes frames",
			"replay":    "the recorded pace; free_run = true plays every frame at once",
			"v4l2":      "the device's default rate",
		}[s.Kind]
		k.add(at("fps"), "must be between 0 (%s) and 1000 frames per second", zero)
	}
	if s.FreeRun && s.Kind != "replay" {
		k.add(at("free_run"), "is for replay sources (a %s source: fps = 0 %s)", s.Kind,
			map[string]string{"synthetic": "is as fast as the pipeline takes frames", "v4l2": "is the device's default rate"}[s.Kind])
	}
	if s.Buffers < 2 || s.Buffers > 32 {
		k.add(at("buffers"), "must be between 2 and 32")
	}
	if s.Kind == "v4l2" {
		k.oneOf(at("io"), s.IO, "auto", "userptr", "mmap")
	}
	if s.Period < 0 {
		k.add(at("period"), "must not be negative")
	}
}

// checkSerialSensor checks a serial sensor's keys; at names them.
func checkSerialSensor(k *checker, s *Source, at func(string) string) {
	if s.Device == "" {
		k.add(at("device"), "missing: a serial source needs device = \"/dev/ttyUSB0\" or a stable /dev/serial/by-id/... path")
	}
	if s.Baud <= 0 {
		k.add(at("baud"), "must be positive")
	}
	k.oneOf(at("protocol"), s.Protocol, "nmea", "csv", "cobs")
	if (s.Protocol == "csv" || s.Protocol == "cobs") && len(s.Columns) == 0 {
		k.add(at("columns"), "missing: protocol %q needs columns = [\"ax\", \"ay\", ...] naming the values", s.Protocol)
	}
	if len(s.Columns) > sensors.MaxSampleValues {
		k.add(at("columns"), "at most %d columns", sensors.MaxSampleValues)
	}
	if s.RingSize < 1 || s.RingSize > 65536 {
		k.add(at("ring"), "must be between 1 and 65536")
	}
}
