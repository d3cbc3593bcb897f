//go:build !race

package trt_test

const raceEnabled = false
