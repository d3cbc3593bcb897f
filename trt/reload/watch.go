package reload

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// watcher is the part of *fsnotify.Watcher the reloader uses; tests wrap
// it to inject faults.
type watcher interface {
	Add(name string) error
	Remove(name string) error
	Close() error
	Events() <-chan fsnotify.Event
	Errors() <-chan error
}

type fsWatcher struct{ w *fsnotify.Watcher }

func newFSWatcher() (watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsWatcher{w}, nil
}

func (f fsWatcher) Add(name string) error         { return f.w.Add(name) }
func (f fsWatcher) Remove(name string) error      { return f.w.Remove(name) }
func (f fsWatcher) Close() error                  { return f.w.Close() }
func (f fsWatcher) Events() <-chan fsnotify.Event { return f.w.Events }
func (f fsWatcher) Errors() <-chan error          { return f.w.Errors }

// watchHint turns a watcher setup error into advice.
func watchHint(what string, err error) error {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return fmt.Errorf("%s: %w (raise fs.inotify.max_user_instances, e.g. sysctl -w fs.inotify.max_user_instances=512)", what, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%s: %w (fs.inotify.max_user_watches reached: raise it, e.g. sysctl -w fs.inotify.max_user_watches=524288)", what, err)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: %w (create the folder; it is watched again once it exists)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// drain owns the watcher's channels: it reads both until they are closed
// (by Close after the worker has stopped), so the fsnotify reader never
// blocks, and turns what it reads into kicks for the worker.
func (r *Reloader) drain(w watcher) {
	defer r.drainWG.Done()
	evs, errs := w.Events(), w.Errors()
	for evs != nil || errs != nil {
		select {
		case ev, ok := <-evs:
			if !ok {
				evs = nil
				continue
			}
			if r.relevant(ev) {
				r.poke(false)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			r.watchError(err)
		case err := <-r.inject:
			r.watchError(err)
		}
	}
}

// watchError handles anything on the Errors channel. After an overflow
// events were lost, and after any other error we cannot tell, so both force
// a full rescan (read and hash, no stat shortcut).
func (r *Reloader) watchError(err error) {
	r.statsMu.Lock()
	r.stats.WatchErrors++
	r.stats.Rescans++
	r.statsMu.Unlock()
	_ = err // the rescan is the whole response; the error itself carries nothing to act on
	r.poke(true)
}

// relevant reports whether an event may concern the model file.
func (r *Reloader) relevant(ev fsnotify.Event) bool {
	if ev.Name == "" {
		// Some backends send events without a name; treat them as
		// "anything may have changed".
		return true
	}
	name := filepath.Clean(ev.Name)
	switch {
	case name == r.path:
		return true
	case name == r.dir:
		// The watched folder itself was removed or renamed (its own
		// watch says so), or another folder or a symlink was renamed
		// over its name (the folder above says Create): the watch is
		// gone or follows the old folder, re-add it at the next check.
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Create) {
			r.dirLost.Store(true)
		}
		return true
	case name == r.pdir:
		// The folder above was removed or renamed: so was the model's
		// path.
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			r.pdirLost.Store(true)
		}
		return true
	case r.linked.Load() && filepath.Dir(name) == r.dir:
		// The model path is a symlink (a Kubernetes ..data swap renames
		// other names in this folder and the model name gets no event).
		return true
	}
	if p := r.resolved.Load(); p != nil && (name == *p || name == filepath.Dir(*p)) {
		return true
	}
	return false
}

// poke records that the file may have changed and wakes the worker; full
// asks for a read even when the file's stat is unchanged.
func (r *Reloader) poke(full bool) {
	if full {
		r.full.Store(true)
	}
	r.kickSeq.Add(1)
	select {
	case r.kick <- struct{}{}:
	default:
	}
}
