//go:build hil

package board

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHILBoard reads the real board's files (or those under
// EDGED_HIL_SYSFS, EDGED_HIL_PROCFS, EDGED_HIL_ROOTFS) and prints what it
// found, every problem, and how long read cycles take. On a Jetson (the
// root has etc/nv_tegra_release) it requires what every Jetson has: a
// thermal zone with a passive trip point, the GPU's devfreq node and
// load, a power mode, an INA3221 rail and MemAvailable; run it as the
// edged user too, to see what an unprivileged daemon cannot read (the
// EMC's debugfs files).
//
//	go test -c -tags hil -o board-hil.test ./runtime/board   # or make hil-arm64
//	./board-hil.test -test.v -test.run HIL
func TestHILBoard(t *testing.T) {
	p := Paths{Sys: os.Getenv("EDGED_HIL_SYSFS"), Proc: os.Getenv("EDGED_HIL_PROCFS"), Root: os.Getenv("EDGED_HIL_ROOTFS")}.WithDefaults()
	r := NewReader(p)
	s, problems := r.Read()
	t.Logf("read %s, %s and %s as uid %d in %s:", p.Sys, p.Proc, p.Root, os.Getuid(), s.Took)
	for _, line := range describe(s) {
		t.Logf("  %s", line)
	}
	for _, z := range s.Zones {
		var trips []string
		for _, tr := range z.Trips {
			trips = append(trips, fmt.Sprintf("%s@%g", tr.Type, tr.Celsius))
		}
		t.Logf("  %s (%s, type %s): trip points %s", z.Name, z.Dir, z.Type, strings.Join(trips, " "))
	}
	for _, pr := range problems {
		t.Logf("  problem: %v", pr)
	}
	var total time.Duration
	const n = 20
	for range n {
		s, _ := r.Read()
		total += s.Took
	}
	t.Logf("a read cycle takes %s on average over %d", total/n, n)

	if _, err := os.Stat(filepath.Join(p.Root, "etc/nv_tegra_release")); err != nil {
		t.Logf("not a Jetson (%v): nothing required", err)
		return
	}
	passive := false
	for _, z := range s.Zones {
		if _, ok := z.Passive(); ok && z.HasTemp {
			passive = true
		}
	}
	gpu := len(s.Freqs) > 0 && s.Freqs[0].Unit == "gpu" && s.Freqs[0].HasHz
	for what, ok := range map[string]bool{
		"a readable thermal zone with a passive trip point": passive,
		"the GPU's devfreq frequency":                       gpu,
		"the GPU's load":                                    s.HasGPULoad,
		"nvpmodel's power mode":                             s.Mode.Known && s.Mode.Name != "",
		"an INA3221 rail":                                   len(s.Rails) > 0,
		"MemAvailable":                                      s.Memory.HasMeminfo,
	} {
		if !ok {
			t.Errorf("a Jetson should have %s; see docs/OPERATIONS.md, \"Board health\", and correct the paths", what)
		}
	}
}
