// Command soak runs the real edged for a while under every kind of churn at
// once and checks that it stays flat: `make soak` (SOAK_DURATION, default
// 10m) builds bin/edged and bin/soak and runs it.
//
// It writes a configuration into a temporary folder: a synthetic camera
// (-fps, default 100) feeding one pipeline on the demo model served from a
// file (variants 0..7 written by `edged demo-model`), a serial IMU (CSV at
// 200 Hz) on a pty attached to every result, a socket sink and a serial
// sink on a second pty, /metrics on a free loopback port and a state
// folder; an MQTT sink to a Mosquitto it starts on loopback (-mqtt,
// needs Debian's mosquitto), and a second pipeline replaying a recording
// in a loop (-replay). It starts `edged run` on it, waits for /readyz,
// and then, for -duration, runs concurrently:
//
//   - model churn: a variant renamed into place every -model-every (3 s),
//     each different from the one serving; it must serve results within
//     20 s. Every -junk-every-th change (5) is preceded by a junk file
//     (text, half a model, an empty file) that must be answered by
//     engine_rejected within 20 s;
//   - SIGHUP every -hup-every (20 s), every other one after changing the
//     camera's rate (-fps, then 0.8 × -fps): config_reloaded must follow;
//   - `edged reload -socket PATH` every -reload-every (15 s): it must
//     succeed;
//   - socket clients: -readers (3) that connect, read 20-500 records (a
//     third of them as CBOR) and leave; a slow reader (one record per
//     100 ms, 5-15 s); a client that connects and never reads, held for
//     write_timeout + 3 s; ghosts that connect and hang up a few times a
//     second (subscribed to nothing, to an unknown pipeline, after
//     half-closing, or without a word);
//   - pty unplug and replug, each device every -unplug-every (30 s), the
//     sink half a period after the sensor: both ends of the pty closed and
//     its symlink removed; once /metrics says it is down (15 s at most) a
//     new pty is plugged in behind the same symlink 1-3 s later, and
//     edged must use it again within 20 s (sensor: edged_source_up 1 and
//     a result carrying a sample; sink: edged_serial_up 1 and a frame
//     decoded from the new pty);
//   - broker restarts: the Mosquitto is stopped for -broker-down (5 s)
//     every -broker-every (60 s); edged must be connected again
//     (edged_sink_connected 1) within 30 s of its return. A subscriber
//     with a persistent session takes every record; at the end every seq
//     from the run's sink_started to the last one delivered must have
//     arrived (duplicates allowed: at least once), unless edged counted
//     it dropped;
//   - the replayed recording replaced under edged every -replay-every
//     (40 s), in turn: a new recording of the same size renamed over it,
//     the same size written over it in place, another frame size written
//     over it in place (then the right size renamed back). After a
//     same-size replacement a result of the replay pipeline must follow
//     within 20 s; after any, the replay source may restart at most 30
//     times in the next 10 s (backoff, not a storm).
//
// A monitor client reads every record throughout. Every second the soak
// samples edged's RSS (/proc/PID/status VmRSS), open fds (/proc/PID/fd),
// goroutines (edged_goroutines from /metrics), edged_results_total and
// the results the monitor received. The churn starts after 5 quiet
// seconds and is followed by 5 more, with the monitor the only client:
// summary.txt compares those two (reported, not judged). At the end it
// stops edged with SIGTERM and writes, to -out (bin/soak-report/<UTC
// time>/): samples.csv (t_s, phase, rss_mib, fds, goroutines,
// results_total, results_per_s as received by the monitor including the
// records it lost to seq gaps, fds_metric from edged_open_fds, clients,
// generation, sha256, serial_up, imu_up), soak.png (RSS, fds, goroutines
// and results/s over time), summary.txt (also printed), summary.json,
// edged.log and edged.toml.
//
// It exits 1 when RSS, fds or goroutines are not flat (Judge: the median
// of the last 20 % of the run against the median of the 20 % after a 10 %
// warm-up; allowed growth: RSS the larger of 15 % and 20 MiB, fds 8,
// goroutines 20; flags change them; each window needs 5 samples, so
// -duration must be 25 s or more), when results stopped for more than
// 5 s, when edged exited or did not stop cleanly on SIGTERM, or when any
// churn step above did not get its answer in time. Everything is on
// loopback and in temporary folders, every wait is bounded, and it stops
// by itself; edged is killed if the soak dies (PR_SET_PDEATHSIG).
//
// It needs no Go at run time: build it with CGO_ENABLED=0.
package main
