package mqttsink

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// A sink's seq is never used twice for its device, whatever happened to
// the state folder between two runs (docs/PROTOCOL.md, "Sequence numbers
// and loss"). Each run starts above two floors:
//
//   - what the state folder records: the seq file's high-water mark
//     (seqfile.go: reserved before any seq above it is queued, the last
//     seq after a clean stop), the segments and the cursor;
//   - the wall clock, in microseconds since 1970. A run hands out far
//     fewer than a million seqs a second, so every seq it used is below
//     the clock's reading at the moment it used it, and a later run that
//     starts at the clock is above them all — even when the folder was
//     lost, could not be read or could not be written.
//
// Either floor alone covers the other's failure: a clock that stepped
// back (a Jetson without an RTC battery boots at its last saved time, or
// at its build date) is covered by the folder's record, a folder that was
// wiped or unwritable by the clock. Only both at once can repeat a seq.

// firstSeq is the seq a run starts at.
func firstSeq(rep OpenReport, now time.Time) uint64 {
	var clock uint64
	if us := now.UnixMicro(); us > 0 {
		clock = uint64(us)
	}
	next := max(rep.LastSeq, rep.HighWater)
	if next < math.MaxUint64 {
		next++
	}
	return max(next, clock)
}

// startReason is the reason of the run's sink_started record.
func startReason(sink, dir string, rep OpenReport, openErr error, first uint64) string {
	var before string
	switch {
	case dir == "":
		before = "no state folder, so nothing records the seqs of earlier runs; seq starts at the clock (microseconds since 1970)"
	case openErr != nil:
		before = fmt.Sprintf("the state folder cannot be used (%v), so seq starts at the clock (microseconds since 1970)", openErr)
	case rep.HighWaterKnown && rep.Clean:
		before = fmt.Sprintf("the previous run stopped cleanly at seq %d", rep.HighWater)
	case rep.HighWaterKnown:
		before = fmt.Sprintf("the previous run did not stop cleanly; it used seqs up to %d at most, and records it had not yet queued on disk were lost", rep.HighWater)
	case rep.LastSeq > 0:
		before = fmt.Sprintf("the state folder records seqs up to %d (no seq file: an older edged)", rep.LastSeq)
	default:
		before = "the state folder records no earlier seq (new, or wiped); seq starts at the clock (microseconds since 1970)"
	}
	return fmt.Sprintf("mqtt sink %q started at seq %d: %s. Seqs between an earlier run's last and %d were never used; none is used twice", sink, first, before, first)
}

// monoNow is CLOCK_MONOTONIC in nanoseconds, the clock of records' t_ns.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
