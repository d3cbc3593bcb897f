package sensorstest

import "runtime"

// Mallocs runs f once to warm up, then measures n runs of f and returns
// the total number of heap allocations they made, the smallest of three
// such measurements. Unlike testing.AllocsPerRun, whose integer average
// hides an allocation every few calls, a path that allocates nothing
// returns exactly 0, and one that allocates every k-th call shows it in
// every measurement. Taking the smallest of three filters out the runtime's
// own allocations, which the counters include: under CPU load a goroutine
// blocked in a syscall (poll, read) can make the scheduler start a new OS
// thread, and that allocates.
func Mallocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	best := ^uint64(0)
	for try := 0; try < 3 && best > 0; try++ {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		for i := 0; i < n; i++ {
			f()
		}
		runtime.ReadMemStats(&b)
		best = min(best, b.Mallocs-a.Mallocs)
	}
	return best
}
