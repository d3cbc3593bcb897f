// Package procfs reads a process's resident memory from /proc/PID/status
// (VmRSS and its peak, VmHWM): one parser for the memory tests of runtime,
// trt and cmd/edged and for the bench and soak tools, which all judge
// memory the same way.
package procfs
