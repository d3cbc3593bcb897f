// Package reload keeps the engines of a model file in step with the file
// while they serve: the hot-reload machinery over the engine contract of
// package trt.
//
// A [Reloader] watches the file's folder (fsnotify, with a periodic rescan
// and a polling fallback), waits until the file is quiet and stable, reads
// it once (checked against the size limit, the memory [Budget] and the
// backend's trt.Sniffer before it is read whole), and runs the reload
// transaction for each [Target]: the replacement is staged off the hot
// path, checked against the pipeline's tensor signature, warmed up and
// only then installed in the target's trt.Hot; a failed reload leaves the
// old engine serving, and rejected content is quarantined until the file
// changes. [Stage] is that validation step, exported so that every engine
// is accepted the same way, whether a Reloader loads it or not; a
// [StagingGate] bounds how many stagings run at once. [Event] reports
// each outcome.
//
// Only this package of trt/ depends on fsnotify: the contract and the
// backends do not.
package reload
