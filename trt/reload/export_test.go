package reload

import (
	"time"
)

// Test seams for the external tests in package reload_test.

// InjectWatchError delivers err as if fsnotify had sent it on Errors.
func (r *Reloader) InjectWatchError(err error) { r.inject <- err }

// SetCheckHook makes f run after every check of the worker with the time
// the check started. Call it before Start.
func (r *Reloader) SetCheckHook(f func(start time.Time)) { r.checkHook = f }

// FailWatcher makes watcher creation fail with err. Call it before Start.
func (r *Reloader) FailWatcher(err error) {
	r.newWatcher = func() (watcher, error) { return nil, err }
}

// TestWatcher is the watcher interface, for fakes in external tests.
type TestWatcher = watcher

// UseWatcher replaces watcher creation. Call it before Start.
func (r *Reloader) UseWatcher(f func() (TestWatcher, error)) { r.newWatcher = f }
