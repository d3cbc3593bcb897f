package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrFormat means /proc/PID/status did not hold what this package reads.
var ErrFormat = errors.New("procfs: unexpected /proc status")

// Mem is a process's resident memory in KiB: now (VmRSS) and at its peak
// (VmHWM).
type Mem struct {
	RSS, HWM uint64
}

// RSSBytes is VmRSS in bytes.
func (m Mem) RSSBytes() int64 { return int64(m.RSS) << 10 }

// ParseStatus reads VmRSS and VmHWM from the text of /proc/PID/status;
// both must be there.
func ParseStatus(status []byte) (Mem, error) {
	var m Mem
	var found int
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return Mem{}, fmt.Errorf("%w: %s:%s", ErrFormat, k, v)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return Mem{}, fmt.Errorf("%w: %s: %w", ErrFormat, k, err)
		}
		if k == "VmRSS" {
			m.RSS = n
		} else {
			m.HWM = n
		}
		found++
	}
	if found != 2 {
		return Mem{}, fmt.Errorf("%w: VmRSS or VmHWM missing", ErrFormat)
	}
	return m, nil
}

// ReadMem reads the memory of process pid; 0 means this process.
func ReadMem(pid int) (Mem, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Mem{}, err
	}
	return ParseStatus(b)
}
