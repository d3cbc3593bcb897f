// Package board reads the health of the machine edged runs on from sysfs,
// procfs and two files of nvpmodel, as a Jetson exposes them: every thermal
// zone with its trip points, the GPU's load and frequency, the EMC and CPU
// frequencies, the active power mode, the INA3221 power rails, and memory
// pressure (MemAvailable, PSI). What a machine does not have is simply
// absent: an x86 host has other thermal zones and no rails.
//
// [Reader] does one read cycle and returns a [Snapshot] with the
// [Problem]s it met (a file that cannot be read, a value that does not
// parse); a missing file is not a problem. [Monitor] owns one goroutine
// that reads every few seconds, never on a frame's path, keeps the latest
// snapshot for its Prometheus collector ([Monitor.Collector]), reports
// each problem once, and turns what it reads into status events: a zone
// reaching its first passive trip point (thermal_throttle) and falling 5 °C
// below it (thermal_ok), a change of power mode, memory pressure and its
// end. The package logs nothing: the daemon logs what it reports.
//
// The paths and where they come from are listed in docs/OPERATIONS.md
// ("Board health"); boardtest lays out fake trees of an Orin (JetPack 5
// and 6), a Xavier and an x86 host for tests.
package board
