// Package demoscene defines the demo scene: a white square moving over a
// background whose colour cycles through Palette. sensors/synthetic draws
// it and trt/demomodel (the built-in demo model) is derived from it, so a
// result can be checked against the frame that produced it: its class is
// the background's palette index and its centroid the square's centre.
// Neither of those packages imports the other.
package demoscene
