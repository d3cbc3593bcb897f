// Package procfs reads a process's resident memory from /proc/PID/status
// (VmRSS and its peak, VmHWM) and the CPU time it has used from
// /proc/PID/stat (utime + stime): one parser for the memory tests of
// runtime, trt and cmd/edged and for the bench and soak tools, which all
// judge memory and CPU the same way.
package procfs
