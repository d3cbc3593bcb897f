package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// UserHZ is the unit of utime and stime in /proc/PID/stat. The kernel
// reports them in USER_HZ, which is 100 on every Linux architecture edged
// runs on (x86-64, arm64), whatever CONFIG_HZ is.
const UserHZ = 100

// ParseStatCPU reads utime + stime of the process (all its threads), in
// clock ticks (UserHZ a second), from the text of /proc/PID/stat.
func ParseStatCPU(stat []byte) (uint64, error) {
	// The command name is in parentheses and may contain anything,
	// parentheses and spaces included: the fields follow its last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat without a command name: %.60q", ErrFormat, stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat: %d fields after the command name, want at least 13", ErrFormat, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: stat: utime %q stime %q", ErrFormat, f[11], f[12])
	}
	return ut + st, nil
}

// ReadCPU reads the CPU time process pid has used, in clock ticks
// (UserHZ a second).
func ReadCPU(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStatCPU(b)
}
