// Package sinktest reads what a sink's Prometheus collector exports, for
// the sink kinds' tests. Tests only.
package sinktest
