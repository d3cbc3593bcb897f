package procfs

import (
	"errors"
	"os"
	"os/exec"
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

// TestReadCPUChild: the CPU time of a process that spins grows. The
// spinner is a child (the way the bench tools read bin/edged), not this
// process: under qemu-user, which runs the arm64 tests in CI, a process's
// own /proc/self/stat and /proc/<own pid>/stat are faked by the emulator
// with utime and stime 0, while another process's stat is the kernel's.
func TestReadCPUChild(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	cmd := exec.Command(sh, "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	n0, err := ReadCPU(cmd.Process.Pid)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		n, err := ReadCPU(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if n > n0 {
			return
		}
	}
	t.Error("ReadCPU: no CPU time counted in 10 s of a child spinning")
}

// TestReadCPUMissing: a process that is gone is an error, not 0.
func TestReadCPUMissing(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if _, err := ReadCPU(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadCPU(no such pid) = %v, want ErrNotExist", err)
	}
}
