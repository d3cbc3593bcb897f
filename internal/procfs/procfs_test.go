package procfs

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
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

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (py (loop) x) S 1 4242 4242 0 -1 4194304 5000 0 0 0 1234 567 0 0 20 0 9 0 100 1000000 2000 18446744073709551615\n"
	n, err := ParseStatCPU([]byte(stat))
	if err != nil || n != 1234+567 {
		t.Errorf("ParseStatCPU = %d, %v; want 1801", n, err)
	}
	for name, bad := range map[string]string{
		"short":           "4242 (x) S 1 2",
		"no command name": "garbage",
		"not a number":    strings.Replace(stat, " 1234 ", " x ", 1),
	} {
		if _, err := ParseStatCPU([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
}

// TestReadCPUSelf: this process's CPU time grows while it spins.
func TestReadCPUSelf(t *testing.T) {
	n0, err := ReadCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		if n, err := ReadCPU(os.Getpid()); err != nil || n > n0 {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Error("ReadCPU: no CPU time counted in 10 s of spinning")
}
