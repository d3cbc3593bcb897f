// Package freelist is the free list of a fixed set of slots: a bounded
// channel that a lease takes from without waiting when it can, and
// otherwise waits on until a slot comes back, its context is done or the
// list is closed. umem's frame pool and the test pool of sensorstest share
// it. Nothing on it allocates.
package freelist
