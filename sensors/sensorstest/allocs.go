package sensorstest

import "runtime"

// Mallocs runs f once to warm up, then n times, and returns the total
// number of heap allocations of those n runs. Unlike
// testing.AllocsPerRun, whose integer average hides an allocation every
// few calls, a steady-state path that allocates nothing returns exactly 0.
func Mallocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for i := 0; i < n; i++ {
		f()
	}
	runtime.ReadMemStats(&b)
	return b.Mallocs - a.Mallocs
}
