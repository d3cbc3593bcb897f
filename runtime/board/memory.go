package board

import (
	"strconv"
	"strings"

	"github.com/edged-dev/edged/umem"
)

// memory reads MemAvailable and MemTotal from procfs's meminfo, and the
// kernel's pressure stall information for memory (pressure/memory, Linux
// 4.20+ with CONFIG_PSI; absent when PSI is off).
func (c *cycle) memory() Memory {
	var m Memory
	if b, st := c.read(procfs, "meminfo", "meminfo"); st == ok {
		if mi, err := umem.ParseMeminfo(b); err == nil {
			m.Available, m.Total, m.HasMeminfo = mi.MemAvailable, mi.MemTotal, true
		} else {
			c.garbage(procfs, "meminfo", "meminfo", b[:min(len(b), 40)])
		}
	}
	if b, st := c.read(procfs, "pressure/memory", "memory pressure"); st == ok {
		if avg10, good := parsePSI(b); good {
			m.Pressure, m.HasPressure = avg10/100, true
		} else {
			c.garbage(procfs, "pressure/memory", "memory pressure", b)
		}
	}
	return m
}

// parsePSI returns the avg10 of the "some" line of a PSI file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func parsePSI(b []byte) (float64, bool) {
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			v, found := strings.CutPrefix(kv, "avg10=")
			if !found {
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x < 0 || x > 100 {
				return 0, false
			}
			return x, true
		}
		return 0, false
	}
	return 0, false
}
