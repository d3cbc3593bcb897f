// Package lifetime is the start/stop plumbing of sources that pace their
// own frames (synthetic, replay): one run from Start to Close, a Stop that
// any goroutine may call to wake a Next blocked in the source, the caller's
// context merged with the run (ctxmerge) for slot leases, and one reusable
// timer for pacing, so a steady-state frame allocates nothing.
//
// Begin, Context, Wait, Stopped and End belong to the source's own lock
// (its Next, Start and the end of its Close); only Stop is called from
// elsewhere.
package lifetime
