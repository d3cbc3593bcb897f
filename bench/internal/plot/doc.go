// Package plot draws the PNG charts of the bench tools (benchcmp's bars,
// soak's time series) with the standard library and golang.org/x/image's
// fixed 7x13 font: no plotting library, nothing to install, and the tools
// stay static (CGO_ENABLED=0).
package plot
