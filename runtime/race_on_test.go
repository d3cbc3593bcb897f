//go:build race

package runtime

// raceEnabled: the race detector's shadow memory is not given back by
// debug.FreeOSMemory, so RSS says nothing about the heap.
const raceEnabled = true
