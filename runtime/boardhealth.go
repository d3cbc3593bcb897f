package runtime

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/edged-dev/edged/runtime/board"
)

// newBoardMonitor makes the monitor of the board's health (runtime/board)
// for the daemon's configuration; run starts it once the sinks can carry
// its status events.
func (d *daemon) newBoardMonitor() *board.Monitor {
	c := d.cfg.Daemon
	return board.New(board.Options{
		Paths:    board.Paths{Sys: c.Sysfs, Proc: c.Procfs, Root: c.Rootfs},
		Events:   d.boardEvent,
		Problems: d.boardProblem,
	})
}

// boardEvent logs a change of the board's state, tells every sink
// (thermal_throttle, thermal_ok, power_mode_changed, memory_pressure,
// memory_ok) and refreshes STATUS=.
func (d *daemon) boardEvent(e board.Event) {
	args := []any{"event", e.Kind, "reason", e.Reason}
	if e.Source != "" {
		args = append(args, "source", e.Source)
	}
	switch e.Kind {
	case board.EventThermalThrottle:
		d.log.Warn("board: a thermal zone reached its passive trip point; the kernel slows the clocks", args...)
	case board.EventMemoryPressure:
		d.log.Warn("board: memory pressure", args...)
	default:
		d.log.Info("board: "+strings.ReplaceAll(e.Kind, "_", " "), args...)
	}
	d.publishStatus(e.Kind, "", e.Source, e.Reason)
	d.refreshStatus()
}

// boardProblem logs, once per file, a board file that cannot be read or
// does not hold what the kernel writes there. A file edged's user may not
// read (the EMC's, in debugfs, under the systemd unit) is expected, and
// said at info level.
func (d *daemon) boardProblem(p board.Problem) {
	log := d.log.Warn
	if errors.Is(p.Err, fs.ErrPermission) {
		log = d.log.Info
	}
	log("board: file not usable; its series is not exported", "file", p.Path, "holds", p.What, "err", p.Err)
}

// boardStatus is the STATUS= part of the board: the power mode, every
// zone that throttles, memory pressure ("" when there is nothing to say).
func (d *daemon) boardStatus() string {
	st := d.board.Status()
	var parts []string
	if st.Mode.Known {
		parts = append(parts, "power mode "+board.ModeName(st.Mode))
	}
	for _, t := range st.Throttling {
		parts = append(parts, t.String())
	}
	if st.Pressure != "" {
		parts = append(parts, "MEMORY PRESSURE ("+st.Pressure+")")
	}
	if len(parts) == 0 {
		return ""
	}
	return "board: " + strings.Join(parts, ", ")
}

// throttleNote says which zones throttle now, for a pipeline's rate:
// "gpu-thermal throttling at 98.5 °C" ("" when none).
func (d *daemon) throttleNote() string {
	var parts []string
	for _, t := range d.board.Status().Throttling {
		parts = append(parts, t.String())
	}
	return strings.Join(parts, ", ")
}
