//go:build !race

package reload_test

const raceEnabled = false
