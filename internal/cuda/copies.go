package cuda

import "sync/atomic"

// Copies counts the memory copies made through this binding since the
// process started, by direction: what a test reads to prove that a frame
// never crossed the host (a picture NVDEC decoded, read by the
// preprocessing kernel where it was written). A 2D copy counts by its
// destination. The copies nvJPEG's C decode loop makes through the entry
// points of [Driver.Proc] are not counted.
type Copies struct {
	HostToDevice, DeviceToHost, DeviceToDevice uint64
}

// Host is the copies that crossed the host: either way.
func (c Copies) Host() uint64 { return c.HostToDevice + c.DeviceToHost }

// Sub is the copies made since an earlier count.
func (c Copies) Sub(earlier Copies) Copies {
	return Copies{c.HostToDevice - earlier.HostToDevice, c.DeviceToHost - earlier.DeviceToHost, c.DeviceToDevice - earlier.DeviceToDevice}
}

var copies struct{ htod, dtoh, dtod atomic.Uint64 }

// CopyCounts returns the copies made so far.
func CopyCounts() Copies {
	return Copies{copies.htod.Load(), copies.dtoh.Load(), copies.dtod.Load()}
}
