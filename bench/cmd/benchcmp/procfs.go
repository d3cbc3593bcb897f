package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/edged-dev/edged/internal/procfs"
)

// userHZ is the unit of utime and stime in /proc/PID/stat. The kernel
// reports them in USER_HZ, which is 100 on every Linux architecture edged
// runs on (x86-64, arm64), whatever CONFIG_HZ is.
const userHZ = 100

// cpuTicks parses /proc/PID/stat and returns utime + stime of the process
// (all its threads) in clock ticks.
func cpuTicks(stat []byte) (uint64, error) {
	// The command name is in parentheses and may contain anything,
	// parentheses and spaces included: the fields follow its last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %.60q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc stat: utime %q stime %q", f[11], f[12])
	}
	return ut + st, nil
}

// memKB parses /proc/PID/status and returns VmRSS and VmHWM (peak RSS) in
// KiB.
func memKB(status []byte) (rss, hwm uint64, err error) {
	m, err := procfs.ParseStatus(status)
	return m.RSS, m.HWM, err
}

func readCPU(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return cpuTicks(b)
}

func readMem(pid int) (rss, hwm uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return memKB(b)
}
