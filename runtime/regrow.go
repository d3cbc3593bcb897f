package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/umem"
)

// regrowWait bounds how long a pipeline waits for its frame slots to come
// back before it replaces its pool.
const regrowWait = 2 * time.Second

// framePool is the pipeline's frame pool, for goroutines other than its
// capture loop (metrics, the memory plan): the capture loop may replace it
// (regrow).
func (p *pipeline) framePool() *umem.Pool {
	p.poolMu.Lock()
	defer p.poolMu.Unlock()
	return p.pool
}

// regrowMeminfo reads the memory a regrown pool must fit in (tests
// replace it).
var regrowMeminfo = func() (umem.Meminfo, error) { return umem.ReadMeminfo("") }

// regrowFits says whether a new pool of bytes fits beside everything
// running now (the old pool included: the new one is made before the old
// is closed), keeping what start-up's memory check keeps for the rest of
// the system. A camera's stream sets the new size (its SPS may say 16384²:
// seven 384 MiB slots), so without this a camera could take the board's
// memory. Without a readable meminfo nothing is checked, as at start.
func regrowFits(bytes int64) error {
	mi, err := regrowMeminfo()
	if err != nil {
		return nil
	}
	avail, _, reserve, ok := hostMemory(mi)
	if ok && bytes > avail-reserve {
		return fmt.Errorf("%w: the new frame pool needs %s, but MemAvailable is %s and edged keeps %s for the rest of the system",
			ErrMemory, FormatSize(bytes), FormatSize(avail), FormatSize(reserve))
	}
	return nil
}

// regrow follows a source whose frames outgrew the slots (a network
// camera that now sends larger pictures: err wraps sensors.ErrGeometry and
// the source's SlotSize says what a slot must hold): once the source is
// closed and every slot is back (the mailbox drained, the frame in
// inference released) and the new pool fits in memory (regrowFits), the
// pool is replaced by one of as many slots of the new size, and the next
// Start gets it; preprocessing plans for each
// frame's format. It reports whether it did; when it did not (the slots
// did not come back, the memory could not be had), the source is started
// again on the old pool and refuses the frames again with the sizes. It
// runs on the capture goroutine.
func (p *pipeline) regrow(ctx context.Context, err error) bool {
	old := p.pool
	if !errors.Is(err, sensors.ErrGeometry) || old == nil || p.alloc == nil {
		return false
	}
	need := SlotSize(p.src, p.scfg)
	if need <= old.SlotSize() {
		return false
	}
	p.mb.drain()
	deadline := time.Now().Add(regrowWait)
	for st := old.Stats(); st.State[umem.SlotFree]+st.Lost < old.Len(); st = old.Stats() {
		if ctx.Err() != nil || time.Now().After(deadline) {
			p.log.Warn("frame slots still in use: the frame pool is not replaced", "source", p.scfg.Name, "slot_bytes", old.SlotSize(), "need", need)
			return false
		}
		p.stampCapture()
		time.Sleep(5 * time.Millisecond)
	}
	if ferr := regrowFits(satMul(int64(old.Len()), int64(need))); ferr != nil {
		p.log.Warn("the frame pool is not replaced for the source's new frame size", "source", p.scfg.Name, "slots", old.Len(), "slot_bytes", need, "err", ferr)
		return false
	}
	np, nerr := umem.NewPool(p.alloc, old.Len(), need)
	if nerr != nil {
		p.log.Warn("a frame pool for the source's new frame size could not be made", "source", p.scfg.Name, "slots", old.Len(), "slot_bytes", need, "err", nerr)
		return false
	}
	p.poolMu.Lock()
	p.pool = np
	p.poolMu.Unlock()
	old.Close()
	p.log.Info("frame pool re-made for the source's new frame size", "source", p.scfg.Name, "slots", np.Len(),
		"slot_bytes", need, "was", old.SlotSize())
	return true
}
