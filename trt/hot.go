package trt

import (
	"encoding/hex"
	"sync/atomic"
)

// Generation is one engine installed in a Hot, with the identity that every
// result it produces carries.
type Generation struct {
	Engine Engine
	Model  string   // model name from the configuration
	Number uint64   // 1 for the first engine, +1 per successful swap; one number for every pipeline sharing the model (InstallAt)
	SHA256 [32]byte // of the model file's bytes

	refs atomic.Int64 // leases plus one while current
}

// SHAPrefix is the first 12 hex digits of the model's SHA-256, as shown in
// results and status lines.
func (g *Generation) SHAPrefix() string { return hex.EncodeToString(g.SHA256[:6]) }

// Release ends a lease from Hot.Acquire. The engine of a generation that is
// no longer current is closed when its last lease ends.
func (g *Generation) Release() {
	if g.refs.Add(-1) == 0 {
		g.Engine.Close()
	}
}

// Hot holds the current engine generation of one pipeline. Acquire and
// Release are lock-free and allocate nothing, so they are used once per
// frame.
type Hot struct {
	cur  atomic.Pointer[Generation]
	next atomic.Uint64
}

// Acquire leases the current generation, or returns nil when none is
// installed. The caller must Release it.
func (h *Hot) Acquire() *Generation {
	for {
		g := h.cur.Load()
		if g == nil {
			return nil
		}
		n := g.refs.Load()
		if n == 0 {
			// Retired between Load and here: cur already points at its
			// successor, so look again.
			continue
		}
		if g.refs.CompareAndSwap(n, n+1) {
			return g
		}
	}
}

// Current returns the current generation without leasing it; only its
// identity fields may be read.
func (h *Hot) Current() *Generation { return h.cur.Load() }

// Install makes e the current engine and returns its generation, numbered
// one more than the last one installed. The previous generation is closed
// once its in-flight leases end.
func (h *Hot) Install(e Engine, model string, sha [32]byte) *Generation {
	return h.InstallAt(e, model, sha, h.next.Load()+1)
}

// InstallAt is Install with the generation's number chosen by the caller:
// the Hots of every pipeline sharing a model are installed with the
// model's one generation number. Later Installs count on from the highest
// number installed.
func (h *Hot) InstallAt(e Engine, model string, sha [32]byte, number uint64) *Generation {
	for {
		n := h.next.Load()
		if number <= n || h.next.CompareAndSwap(n, number) {
			break
		}
	}
	g := &Generation{Engine: e, Model: model, SHA256: sha, Number: number}
	g.refs.Store(1)
	if old := h.cur.Swap(g); old != nil {
		old.Release()
	}
	return g
}

// Close retires the current generation; it is closed when its last lease
// ends. Close is idempotent.
func (h *Hot) Close() {
	if old := h.cur.Swap(nil); old != nil {
		old.Release()
	}
}
