package main

import (
	"github.com/edged-dev/edged/internal/procfs"
)

// userHZ is the unit of readCPU's ticks.
const userHZ = procfs.UserHZ

// readCPU returns utime + stime of process pid, all its threads, in ticks.
func readCPU(pid int) (uint64, error) { return procfs.ReadCPU(pid) }

// readMem returns VmRSS and VmHWM (peak RSS) of process pid in KiB.
func readMem(pid int) (rss, hwm uint64, err error) {
	m, err := procfs.ReadMem(pid)
	return m.RSS, m.HWM, err
}
