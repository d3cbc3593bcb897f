//go:build race

package reload_test

// raceEnabled: the race detector keeps shadow memory for the heap that
// debug.FreeOSMemory does not return, so RSS says nothing about the heap.
const raceEnabled = true
