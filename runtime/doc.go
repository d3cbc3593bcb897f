// Package runtime is the edged daemon: the lifecycle (start, SIGHUP
// reload, stop within a budget) of the configuration runtime/config
// loads, pipelines (source -> preprocess -> engine -> postprocess -> sinks)
// with latest-frame-wins scheduling, supervision of devices that come and
// go, health (sd_notify READY/STATUS/WATCHDOG fed by pipeline progress) and
// metrics.
//
// runtime consumes small interfaces; cmd/edged supplies the concrete
// sources, engines and sinks through Factories, so everything here runs in
// tests with fakes.
package runtime
