package procfs

import (
	"errors"
	"strings"
	"testing"
)

const status = "Name:\tedged\nVmPeak:\t  900000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   80000 kB\nThreads:\t12\n"

func TestParseStatus(t *testing.T) {
	m, err := ParseStatus([]byte(status))
	if err != nil || m.RSS != 80000 || m.HWM != 81234 || m.RSSBytes() != 80000<<10 {
		t.Fatalf("ParseStatus = %+v, %v", m, err)
	}
	for name, bad := range map[string]string{
		"no VmRSS":     strings.Replace(status, "VmRSS", "VmXXX", 1),
		"no VmHWM":     strings.Replace(status, "VmHWM", "VmXXX", 1),
		"no unit":      strings.Replace(status, "80000 kB", "80000", 1),
		"not a number": strings.Replace(status, "80000 kB", "8e4 kB", 1),
	} {
		if _, err := ParseStatus([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
}

func TestReadMemSelf(t *testing.T) {
	m, err := ReadMem(0)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if m.RSS == 0 || m.HWM < m.RSS {
		t.Errorf("ReadMem(0) = %+v", m)
	}
}
