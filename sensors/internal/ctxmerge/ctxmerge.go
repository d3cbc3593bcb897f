package ctxmerge

import (
	"context"
	"reflect"
)

// Merger caches the merge of a lifetime context with the caller's latest
// context. It is not safe for concurrent use: the owning source serialises
// the calls that use it.
type Merger struct {
	life   context.Context
	onDone func()

	caller context.Context
	merged context.Context
	cancel context.CancelFunc
	stopA  func() bool // AfterFunc(caller, cancel)
	stopB  func() bool // AfterFunc(merged, onDone)
}

// New returns a Merger for the lifetime life. onDone, when not nil, runs
// in its own goroutine each time a merged context ends (for example to
// write an eventfd that a poll(2) waits on).
func New(life context.Context, onDone func()) *Merger {
	return &Merger{life: life, onDone: onDone}
}

// Context returns a context that is done when life or caller is done.
func (m *Merger) Context(caller context.Context) context.Context {
	if m.merged != nil && same(caller, m.caller) {
		return m.merged
	}
	m.Release()
	merged, cancel := context.WithCancel(m.life)
	m.caller, m.merged, m.cancel = caller, merged, cancel
	m.stopA = context.AfterFunc(caller, cancel)
	if m.onDone != nil {
		m.stopB = context.AfterFunc(merged, m.onDone)
	}
	return merged
}

// Release drops the cached merge. It must be called when the owner is done
// with the Merger so no AfterFunc registration outlives it.
func (m *Merger) Release() {
	if m.cancel == nil {
		return
	}
	m.stopA()
	if m.stopB != nil {
		m.stopB()
	}
	m.cancel()
	m.caller, m.merged, m.cancel, m.stopA, m.stopB = nil, nil, nil, nil, nil
}

// same compares two contexts by identity without panicking on a context
// type that is not comparable.
func same(a, b context.Context) bool {
	if a == nil || b == nil {
		return a == b
	}
	ta := reflect.TypeOf(a)
	if ta != reflect.TypeOf(b) || !ta.Comparable() {
		return false
	}
	return a == b
}
