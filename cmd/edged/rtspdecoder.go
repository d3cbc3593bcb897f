package main

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/nvdec"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/v4l2dec"
)

// Which decoder serves a network camera (its decoder key), as run builds
// it and check says it: "cpu" is libavcodec; "nvdec" is NVDEC on the
// daemon's CUDA device ([gpu] device), refused when libnvcuvid or the
// device is missing; "v4l2" is the Jetson decoder engine, refused where
// there is none; "auto" is NVDEC where both are present and its NVDEC
// decodes the stream's codec, else libavcodec. auto does not choose the
// Jetson decoder: it has not run on a board yet (docs/HIL.md).

// nvdecHere is what NVDEC can do on a device, asked once per process and
// device (Probe loads libnvcuvid and opens the device).
type nvdecHere struct {
	name       string
	h264, h265 nvdec.Caps
	err        error
}

var (
	nvdecMu     sync.Mutex
	nvdecProbes = map[int]*nvdecHere{}
)

func probeNVDEC(device int) *nvdecHere {
	nvdecMu.Lock()
	defer nvdecMu.Unlock()
	if h := nvdecProbes[device]; h != nil {
		return h
	}
	h := &nvdecHere{}
	h.name, h.h264, h.h265, h.err = nvdec.Probe("", device)
	nvdecProbes[device] = h
	return h
}

// caps is what NVDEC decodes of codec c.
func (h *nvdecHere) caps(c h26x.Codec) nvdec.Caps {
	if c == h26x.H265 {
		return h.h265
	}
	return h.h264
}

// describe says what NVDEC is here: "NVDEC on CUDA device 0 (NVIDIA
// H200: H.264 up to 4096x4096, H.265 up to 8192x8192, 7 engines)".
func (h *nvdecHere) describe(device int) string {
	var parts []string
	for _, c := range []h26x.Codec{h26x.H264, h26x.H265} {
		if k := h.caps(c); k.Supported {
			parts = append(parts, fmt.Sprintf("%s up to %dx%d", c, k.MaxWidth, k.MaxHeight))
		}
	}
	return fmt.Sprintf("NVDEC on CUDA device %d (%s: %s, %d engines)", device, h.name, strings.Join(parts, ", "), h.h264.Engines)
}

// cpuLine says libavcodec serves, or what to install (ok false).
func cpuLine(why string) (string, bool) {
	file, ver, err := avcodec.Load("")
	if err != nil {
		return fmt.Sprintf("no decoder: %v; install FFmpeg's libavcodec (Debian 12: apt install libavcodec59; Debian 13: libavcodec61; JetPack 5/6: apt install libavcodec58)", err), false
	}
	return fmt.Sprintf("decoded on the CPU by %s (%s): %s", file, ver, why), true
}

// decoderChoice says which decoder serves a network camera whose stream
// has codec c, and why, or what is missing (ok false).
func decoderChoice(sc *config.Source, c *config.Config, codec h26x.Codec) (line string, ok bool) {
	switch sc.Decoder {
	case rtsp.DecoderCPU:
		return cpuLine(`decoder = "cpu"`)
	case rtsp.DecoderV4L2:
		node, err := v4l2dec.Probe()
		if err != nil {
			return fmt.Sprintf("decoder = \"v4l2\", but the Jetson decoder cannot serve: %v", err), false
		}
		return fmt.Sprintf("decoded by the Jetson video decoder (%s through libv4l2): decoder = \"v4l2\"", node), true
	case rtsp.DecoderNVDEC:
		h := probeNVDEC(c.GPU.Device)
		if h.err != nil {
			return fmt.Sprintf("decoder = \"nvdec\", but NVDEC cannot serve: %v", h.err), false
		}
		if !h.caps(codec).Supported {
			return fmt.Sprintf("decoder = \"nvdec\", but %s does not decode %s", h.describe(c.GPU.Device), codec), false
		}
		return fmt.Sprintf("decoded by %s: decoder = \"nvdec\"", h.describe(c.GPU.Device)), true
	}
	h := probeNVDEC(c.GPU.Device)
	switch {
	case h.err == nil && h.caps(codec).Supported:
		return fmt.Sprintf("decoded by %s: decoder = \"auto\", and libnvcuvid and the CUDA device are here", h.describe(c.GPU.Device)), true
	case h.err == nil:
		return cpuLine(fmt.Sprintf("decoder = \"auto\", and %s does not decode %s", h.describe(c.GPU.Device), codec))
	}
	return cpuLine(fmt.Sprintf("decoder = \"auto\", and NVDEC is not here (%v)", shortNVDEC(h.err)))
}

// shortNVDEC is why NVDEC is not here, without the package's prefix.
func shortNVDEC(err error) string {
	return strings.TrimPrefix(err.Error(), nvdec.ErrNoNVDEC.Error()+": ")
}

// newDecoder is what opens a network camera's decoder for each session.
// A camera set to "nvdec" on a machine without it is the configuration's
// to fix (exit 78 at start).
func newDecoder(sc *config.Source, c *config.Config) (rtsp.NewDecoder, error) {
	device := c.GPU.Device
	switch sc.Decoder {
	case rtsp.DecoderCPU:
		return cpuDecoder, nil
	case rtsp.DecoderV4L2:
		if _, err := v4l2dec.Probe(); err != nil {
			return nil, fmt.Errorf("%w: source %q: decoder = \"v4l2\": %w", config.ErrInvalid, sc.Name, err)
		}
		return func(codec h26x.Codec, params []byte) (rtsp.Decoder, error) {
			d, err := v4l2dec.Open(codec, v4l2dec.Options{Params: params})
			if err != nil {
				return nil, err
			}
			return d, nil
		}, nil
	case rtsp.DecoderNVDEC:
		h := probeNVDEC(device)
		if h.err != nil {
			return nil, fmt.Errorf("%w: source %q: decoder = \"nvdec\": %w", config.ErrInvalid, sc.Name, h.err)
		}
		return func(codec h26x.Codec, params []byte) (rtsp.Decoder, error) {
			if !h.caps(codec).Supported {
				return nil, fmt.Errorf("%w: %s does not decode %s (decoder = \"nvdec\")", sensors.ErrFormat, h.describe(device), codec)
			}
			return openNVDEC(codec, params, device)
		}, nil
	}
	name := sc.Name
	return func(codec h26x.Codec, params []byte) (rtsp.Decoder, error) {
		h := probeNVDEC(device)
		if h.err != nil || !h.caps(codec).Supported {
			if isDevFed(name) {
				return nil, fmt.Errorf("%w: %s does not decode %s, and this camera's frames live in device memory, which the CPU decoder cannot write", sensors.ErrFormat, h.describe(device), codec)
			}
			return cpuDecoder(codec, params)
		}
		d, err := openNVDEC(codec, params, device)
		if err != nil && isDevFed(name) {
			// libavcodec cannot write the device memory this camera's
			// frames live in: the session fails and is retried.
			return nil, fmt.Errorf("NVDEC could not open a decoder, and this camera's frames live in device memory, which the CPU decoder cannot write: %w", err)
		}
		if err != nil {
			// A GPU out of decoders or memory: this session decodes on the CPU.
			slog.Warn("network camera: NVDEC could not open a decoder; this session decodes on the CPU", "source", name, "err", err)
			return cpuDecoder(codec, params)
		}
		return d, nil
	}, nil
}

func openNVDEC(codec h26x.Codec, params []byte, device int) (rtsp.Decoder, error) {
	d, err := nvdec.Open(codec, nvdec.Options{Device: device, Params: params})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// cpuDecoder opens libavcodec for one session (libavcodec chooses its
// threads).
func cpuDecoder(c h26x.Codec, params []byte) (rtsp.Decoder, error) {
	d, err := avcodec.Open(c, avcodec.Options{Params: params})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// logDecoder logs a camera's stream and decoder when a session starts
// with another than the last one logged.
func (s *rtspCamera) logDecoder() {
	desc := s.Source.Describe()
	if desc == "" || desc == s.logged {
		return
	}
	s.logged = desc
	slog.Info("network camera", "source", s.Name(), "stream", desc)
}

// isDevFed reports whether camera name's frames live in device memory now
// (frames.go).
func isDevFed(name string) bool {
	_, ok := devFed.Load(name)
	return ok
}
