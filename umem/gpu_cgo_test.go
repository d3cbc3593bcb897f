//go:build cgo && linux

package umem

import (
	"testing"

	"golang.org/x/sys/unix"
)

func gettid() int { return unix.Gettid() }

func nvrtcPath() string {
	if nvrtcLoaded == nil {
		return ""
	}
	return nvrtcLoaded.path
}

// The built-in name table agrees with the driver's cuGetErrorName for
// every code from 0 to 1000.
func TestGPUErrorTableMatchesDriver(t *testing.T) {
	gpuDevice(t, DeviceOptions{})
	drv := theDrv
	known, textDiffs := 0, 0
	for r := Result(0); r <= 1000; r++ {
		name, ok := drv.errorName(r)
		mine, have := resultTable[r]
		switch {
		case ok && !have:
			t.Errorf("driver knows %d = %s; the built-in table does not", r, name)
		case ok && mine.name != name:
			t.Errorf("code %d: table says %s, driver says %s", r, mine.name, name)
		case !ok && have:
			t.Logf("code %d (%s) is unknown to this driver", r, mine.name)
		}
		if ok {
			known++
			if text, _ := drv.errorText(r); have && mine.text != text {
				// Texts may change between drivers; the driver's is used when loaded.
				t.Logf("code %d: built-in text %q, driver text %q", r, mine.text, text)
				textDiffs++
			}
		}
	}
	t.Logf("driver knows %d codes; table has %d; %d texts differ", known, len(resultTable), textDiffs)
}
