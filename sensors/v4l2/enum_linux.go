//go:build amd64 || arm64

package v4l2

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/sensors"
)

// maxEnum bounds every enumeration loop against drivers that never say
// EINVAL.
const maxEnum = 256

func enumerate(dev device) (Offers, error) {
	var out Offers
	for i := 0; i < maxEnum; i++ {
		d := fmtDesc{Index: uint32(i), Type: bufTypeVideoCapture}
		if err := dev.ioctl(vidiocEnumFmt, unsafe.Pointer(&d)); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break
			}
			return nil, err
		}
		fi := FormatInfo{Pixel: sensors.PixelFormat(d.Pixelformat), Description: cstr(d.Description[:]), Compressed: d.Flags&fmtFlagCompressed != 0}
		sizes, err := enumSizes(dev, d.Pixelformat)
		if err != nil {
			return nil, err
		}
		fi.Sizes = sizes
		out = append(out, fi)
	}
	return out, nil
}

func enumSizes(dev device, pix uint32) ([]SizeInfo, error) {
	var out []SizeInfo
	for i := 0; i < maxEnum; i++ {
		e := frmSizeEnum{Index: uint32(i), Format: pix}
		if err := dev.ioctl(vidiocEnumFramesizes, unsafe.Pointer(&e)); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
				break
			}
			return nil, err
		}
		var si SizeInfo
		switch e.Type {
		case frmsizeTypeDiscrete:
			si.Width, si.Height = int(e.Discrete.Width), int(e.Discrete.Height)
		default:
			sw := e.stepwise()
			si.Width, si.Height = int(sw.Min_width), int(sw.Min_height)
			si.MaxWidth, si.MaxHeight = int(sw.Max_width), int(sw.Max_height)
			si.StepWidth, si.StepHeight = int(sw.Step_width), int(sw.Step_height)
		}
		fps, err := enumRates(dev, pix, uint32(si.Width), uint32(si.Height))
		if err != nil {
			return nil, err
		}
		si.FPS = fps
		out = append(out, si)
		if e.Type != frmsizeTypeDiscrete {
			break // one range describes them all
		}
	}
	return out, nil
}

func enumRates(dev device, pix, w, h uint32) ([]float64, error) {
	var out []float64
	rate := func(f fract) float64 {
		if f.Numerator == 0 {
			return 0
		}
		return float64(f.Denominator) / float64(f.Numerator)
	}
	for i := 0; i < maxEnum; i++ {
		e := frmIvalEnum{Index: uint32(i), Format: pix, Width: w, Height: h}
		if err := dev.ioctl(vidiocEnumFrameintervals, unsafe.Pointer(&e)); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
				break
			}
			return nil, err
		}
		if e.Type == frmivalTypeDiscrete {
			out = append(out, rate(e.Discrete))
			continue
		}
		sw := e.stepwise()
		out = append(out, rate(sw.Max), rate(sw.Min)) // slowest, fastest
		break
	}
	return out, nil
}

// DeviceInfo is what Probe reports about a camera.
type DeviceInfo struct {
	Node, Driver, Card, BusInfo string
	Formats                     Offers
}

// Probe opens the camera named by opts.Device (path or stable name, as for
// Start), reports its identity and the formats, sizes and rates it offers,
// and closes it. It does not stream; `edged check` uses it.
func Probe(opts Options) (DeviceInfo, error) {
	o := opts.withDefaults()
	s := &Source{opts: o, open: openFileDevice, wakeFd: -1}
	return s.probe()
}

func (s *Source) probe() (DeviceInfo, error) {
	node, err := s.resolve()
	if err != nil {
		return DeviceInfo{}, err
	}
	dev, err := s.open(node)
	if err != nil {
		return DeviceInfo{}, s.openError(node, err)
	}
	defer dev.close()
	var c capability
	if err := dev.ioctl(vidiocQuerycap, unsafe.Pointer(&c)); err != nil {
		return DeviceInfo{}, s.errorf("%w: %s: VIDIOC_QUERYCAP: %w", ErrNotCapture, node, err)
	}
	info := DeviceInfo{Node: node, Driver: cstr(c.Driver[:]), Card: cstr(c.Card[:]), BusInfo: cstr(c.Bus_info[:])}
	if info.Formats, err = enumerate(dev); err != nil {
		return info, s.errorf("%s: enumerating formats: %w", node, err)
	}
	return info, nil
}
