package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/edged-dev/edged/runtime/board"
	"github.com/edged-dev/edged/runtime/config"
)

// checkBoard reads the board's health once, where run reads it ([daemon]
// sysfs, procfs, rootfs), and says the power mode, the thermal zones (a
// warning for each that throttles), the GPU, the clocks, the power rails
// and memory; a file that cannot be used is a warning. None of it changes
// the exit status: a hot board still runs the configuration.
func checkBoard(stdout io.Writer, cfg *config.Config, ok, warn func(string, ...any)) {
	fmt.Fprintln(stdout, "board:")
	d := cfg.Daemon
	paths := board.Paths{Sys: d.Sysfs, Proc: d.Procfs, Root: d.Rootfs}.WithDefaults()
	for _, p := range []string{paths.Sys, paths.Proc, paths.Root} {
		if !filepath.IsAbs(p) {
			fmt.Fprintf(stdout, "        not checked: daemon.sysfs, procfs or rootfs is not an absolute path (listed on stderr)\n")
			return
		}
	}
	s, problems := board.NewReader(paths).Read()
	said := false
	say := func(f func(string, ...any), format string, a ...any) { said = true; f(format, a...) }
	if s.Mode.Known {
		say(ok, "power mode %s", board.ModeLabel(s.Mode))
	}
	var zones []string
	for _, z := range s.Zones {
		if !z.HasTemp {
			continue
		}
		trip, passive := z.Passive()
		if passive && z.Celsius >= trip {
			say(warn, "%s at %.1f °C: at or above its first passive trip point (%.1f °C), the kernel slows the clocks", z.Name, z.Celsius, trip)
			continue
		}
		zones = append(zones, fmt.Sprintf("%s %.1f °C", z.Name, z.Celsius))
	}
	if len(zones) > 0 {
		say(ok, "thermal zones: %s", strings.Join(zones, ", "))
	}
	var clocks []string
	for _, f := range s.Freqs {
		switch {
		case f.HasHz && f.HasMax:
			clocks = append(clocks, fmt.Sprintf("%s %.0f of %.0f MHz", f.Unit, f.Hz/1e6, f.Max/1e6))
		case f.HasHz:
			clocks = append(clocks, fmt.Sprintf("%s %.0f MHz", f.Unit, f.Hz/1e6))
		default:
			clocks = append(clocks, fmt.Sprintf("%s at most %.0f MHz", f.Unit, f.Max/1e6))
		}
	}
	if s.HasGPULoad {
		clocks = append([]string{fmt.Sprintf("GPU load %.0f %%", 100*s.GPULoad)}, clocks...)
	}
	if len(clocks) > 0 {
		say(ok, "%s", strings.Join(clocks, ", "))
	}
	var rails []string
	for _, r := range s.Rails {
		rails = append(rails, fmt.Sprintf("%s %.2f V × %.3f A = %.2f W", r.Name, r.Volts, r.Amps, r.Watts))
	}
	if len(rails) > 0 {
		say(ok, "power rails: %s", strings.Join(rails, ", "))
	}
	if m := s.Memory; m.HasMeminfo {
		line := fmt.Sprintf("memory: MemAvailable %.1f of %.1f GiB", float64(m.Available)/(1<<30), float64(m.Total)/(1<<30))
		if m.HasPressure {
			line += fmt.Sprintf(", tasks waited for memory %.0f %% of the last 10 s (PSI)", 100*m.Pressure)
		}
		say(ok, "%s", line)
	}
	for _, p := range problems {
		say(warn, "%v (not exported)", p)
	}
	if !said {
		fmt.Fprintf(stdout, "        nothing to read under %s, %s and %s (not a Jetson?)\n", paths.Sys, paths.Proc, paths.Root)
	}
}
