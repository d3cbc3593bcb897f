package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/edged-dev/edged/runtime/batch"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// batchGroup is what a batched pipeline (sources = [...]) has besides a
// pipeline of one camera: a lane per camera, each a pipeline value with
// its own source, frame pool, restarts and capture goroutine (lanes[0] is
// the pipeline itself, the one the graph lists), whose frames go to one
// Batcher instead of a mailbox; the pipeline's inference goroutine takes
// them as batches, preprocesses each frame into its entry of the engine's
// batched input, runs one inference and publishes one record per frame.
// Everything a batch touches is made when the engine is bound (views)
// or at start (the Batcher, its Batch), so a batch allocates nothing.
type batchGroup struct {
	lanes []*pipeline
	b     *batch.Batcher[sensors.Frame]
	cur   *batch.Batch[sensors.Frame]
	byIdx []*pipeline // the lane at each place of the Batcher

	// Bound from the engine (bindViews): the most frames of an inference,
	// and each entry's view of the input preprocessing fills and of
	// every output.
	max     int
	viewsOf trt.Engine // the engine the views are of
	in      []*trt.Tensor
	outs    [][]*trt.Tensor // [entry][output]

	// Per entry of the batch being run.
	frames []batchEntry
	gpu    []preprocess.BatchFrame
	trs    []preprocess.Transform
}

// batchEntry is what a batch keeps of each frame after its slot is
// released.
type batchEntry struct {
	lane             *pipeline
	seq              uint64
	tCapture, tReady int64
	arrived          int64
	clock            sensors.CaptureClock
	format           sensors.Format
	tapped, ok       bool
	transform        preprocess.Transform
	preErr           error
}

// batchRunner is a GPU preprocessing path that converts a batch's frames
// in one launch (preprocess.GPU.RunBatch).
type batchRunner interface {
	RunBatch(frames []preprocess.BatchFrame, dst umem.Buffer, trs []preprocess.Transform) error
}

// lanesOf are the pipeline's cameras: its lanes, or itself.
func (p *pipeline) lanesOf() []*pipeline {
	if p.bat != nil {
		return p.bat.lanes
	}
	return []*pipeline{p}
}

// head is the pipeline a lane belongs to (itself for a pipeline of one
// camera).
func (p *pipeline) head() *pipeline {
	if p.bat != nil {
		return p.bat.lanes[0]
	}
	return p
}

// allDown reports whether none of the pipeline's cameras is up.
func (p *pipeline) allDown() bool {
	for _, l := range p.lanesOf() {
		if l.sourceUp.Load() {
			return false
		}
	}
	return true
}

// camerasDown is, for STATUS=, the cameras of a batched pipeline that are
// down (", cameras down: cam3"), or "".
func (p *pipeline) camerasDown() string {
	if p.bat == nil {
		return ""
	}
	var down []string
	for _, l := range p.bat.lanes {
		if !l.sourceUp.Load() {
			down = append(down, l.scfg.Name)
		}
	}
	if len(down) == 0 {
		return ""
	}
	return ", cameras down: " + strings.Join(down, ", ")
}

// BatchSize is the most frames per inference of batched pipeline pc of
// c (0 for a pipeline of one source): its batch, else the number of its
// sources capped by the batch dimension its model declares when that is
// fixed (DeclaredBatch); capped says so.
func BatchSize(c *config.Config, pc *config.Pipeline) (n int, capped bool) {
	if pc == nil || !pc.Batched() {
		return 0, false
	}
	if pc.Batch > 0 {
		return pc.Batch, false
	}
	n = len(pc.Sources)
	if mc := c.Model(pc.Model); mc != nil {
		if d, ok := DeclaredBatch(c, mc); ok && d.Fixed && d.Max < n {
			return d.Max, true
		}
	}
	return n, false
}

// ModelThreads is how many intra-op threads ONNX Runtime runs model mc's
// session with (one session for every pipeline of the model): its
// threads when set; else 1, unless a batched pipeline names it, then the
// largest such pipeline's batch, capped at the cores this process may run
// on. A pipeline per camera runs its inference on its own goroutine, so
// eight cameras use eight cores with one thread each; a batched pipeline
// runs one inference of eight frames at a time, on one core with one
// thread: measured on 16 cores (docs/PERFORMANCE.md), batching at one
// thread gave 0.25 of the results of a pipeline per camera. why says
// where n came from, for edged check.
func ModelThreads(c *config.Config, mc *config.Model) (n int, why string) {
	if mc.Threads > 0 {
		return mc.Threads, "threads"
	}
	n, why = 1, "threads = 0: 1"
	var by string
	for i := range c.Pipelines {
		pc := &c.Pipelines[i]
		if pc.Model != mc.Name || !pc.Batched() {
			continue
		}
		if b, _ := BatchSize(c, pc); b > n {
			n, by = b, pc.Name
		}
	}
	if by == "" {
		return n, why
	}
	cores := goruntime.NumCPU()
	if n > cores {
		return cores, fmt.Sprintf("threads = 0: batched pipeline %s's batch %d, capped at the %d cores", by, n, cores)
	}
	return n, fmt.Sprintf("threads = 0: batched pipeline %s's batch", by)
}

// entrySignature is sig as one entry of a batched engine sees it: axis 0
// of every tensor 1 (preprocessing and post-processing work on one frame).
func entrySignature(sig trt.Signature) trt.Signature {
	one := func(ts []trt.TensorSpec) []trt.TensorSpec {
		out := make([]trt.TensorSpec, len(ts))
		for i, t := range ts {
			out[i] = t
			if len(t.Shape) > 0 {
				out[i].Shape = append([]int64{1}, t.Shape[1:]...)
			}
		}
		return out
	}
	return trt.Signature{Inputs: one(sig.Inputs), Outputs: one(sig.Outputs)}
}

// planSignature is the signature pipeline pc plans with on engine e.
func planSignature(pc *config.Pipeline, e trt.Engine) trt.Signature {
	sig := trt.SignatureOf(e)
	if pc.Batched() {
		return entrySignature(sig)
	}
	return sig
}

// entryBuffer is entry i's part of a batched tensor's memory.
type entryBuffer struct {
	umem.Buffer
	off, n int
}

func (b entryBuffer) Len() int { return b.n }

func (b entryBuffer) Host() ([]byte, error) {
	h, err := b.Buffer.Host()
	if err != nil {
		return nil, err
	}
	if b.off+b.n > len(h) {
		return nil, fmt.Errorf("batch entry at %d of %d bytes: the tensor has %d", b.off, b.n, len(h))
	}
	return h[b.off : b.off+b.n : b.off+b.n], nil
}

func (b entryBuffer) Device() uintptr {
	if d := b.Buffer.Device(); d != 0 {
		return d + uintptr(b.off)
	}
	return 0
}

// Release does nothing: the engine owns the tensor.
func (entryBuffer) Release() error { return nil }

// entryViews are tensor t's first n entries, one tensor each.
func entryViews(t *trt.Tensor, n int) []*trt.Tensor {
	size := trt.EntryBytes(t)
	views := make([]*trt.Tensor, n)
	for i := range views {
		spec := t.TensorSpec
		if len(spec.Shape) > 0 {
			spec.Shape = append([]int64{1}, spec.Shape[1:]...)
		}
		views[i] = &trt.Tensor{TensorSpec: spec, Buf: entryBuffer{Buffer: t.Buf, off: i * int(size), n: int(size)}}
	}
	return views
}

// bindViews makes the entry views of engine e (once per engine: at bind
// and for each new generation).
func (g *batchGroup) bindViews(e trt.Engine, inIdx int) error {
	be, ok := e.(trt.Batched)
	if !ok || be.MaxBatch() < 1 {
		return fmt.Errorf("%w: the engine was not loaded for batches", trt.ErrBatch)
	}
	n := be.MaxBatch()
	sig := trt.SignatureOf(e)
	// The tensors of the largest batch: their memory holds every entry.
	if err := be.SetBatch(n); err != nil {
		return err
	}
	ins, outs := e.Inputs(), e.Outputs()
	if inIdx < 0 || inIdx >= len(ins) || len(outs) != len(sig.Outputs) {
		return fmt.Errorf("%w: the engine's tensors are not its signature's", trt.ErrBatch)
	}
	g.max = n
	g.in = entryViews(ins[inIdx], n)
	g.outs = make([][]*trt.Tensor, n)
	per := make([][]*trt.Tensor, len(outs))
	for j, t := range outs {
		per[j] = entryViews(t, n)
	}
	for i := range g.outs {
		g.outs[i] = make([]*trt.Tensor, len(outs))
		for j := range outs {
			g.outs[i][j] = per[j][i]
		}
	}
	if len(g.frames) < n {
		g.frames = make([]batchEntry, n)
		g.gpu = make([]preprocess.BatchFrame, 0, n)
		g.trs = make([]preprocess.Transform, n)
	}
	g.viewsOf = e
	return nil
}

// newBatcher makes the Batcher of a batched pipeline and adds its lanes
// (startPipeline).
func (p *pipeline) newBatcher() error {
	g, pc := p.bat, p.cfg
	if g.max < 1 {
		return fmt.Errorf("pipeline %q: no batched engine bound", pc.Name)
	}
	b, err := batch.New(batch.Options[sensors.Frame]{
		Cameras: len(g.lanes), Batch: min(g.max, len(g.lanes)), Wait: pc.BatchWait.Duration,
		Latest: pc.Schedule == "latest", Depth: pc.Queue,
		Release: func(f sensors.Frame) { f.Slot.Release() },
	})
	if err != nil {
		return fmt.Errorf("pipeline %q: %w", pc.Name, err)
	}
	g.byIdx = make([]*pipeline, len(g.lanes))
	for _, l := range g.lanes {
		cam, err := b.Add(l.scfg.Name)
		if err != nil {
			b.Close()
			return fmt.Errorf("pipeline %q: %w", pc.Name, err)
		}
		l.cam = cam
		g.byIdx[cam.Index()] = l
	}
	g.b, g.cur = b, b.NewBatch()
	return nil
}

// putBatch hands a lane's frame to the Batcher (deliver, for lanes of a
// batched pipeline); ok is false when the pipeline stops.
func (p *pipeline) putBatch(ctx context.Context, f sensors.Frame) (dropped int, ok bool) {
	n, err := p.bat.b.Put(ctx, p.cam, f)
	return n, err == nil
}

// inferBatches is the inference goroutine of a batched pipeline.
func (p *pipeline) inferBatches(ctx context.Context) {
	g := p.bat
	idle := p.idle()
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		t.Reset(idle)
		ok, err := g.b.NextUntil(ctx, g.cur, t.C)
		if err != nil {
			return
		}
		if !ok {
			p.stampInfer() // idle: waiting for frames is progress
			continue
		}
		t0 := monoNow()
		n := g.cur.Len()
		p.processBatch(ctx, g.cur)
		p.perf.processedN(monoNow()-t0, n)
	}
}

func releaseBatch(bt *batch.Batch[sensors.Frame]) {
	for i := range bt.Frames {
		bt.Frames[i].Slot.Release()
		bt.Frames[i] = sensors.Frame{}
	}
}

// processBatch runs one batch: every frame preprocessed into its entry,
// one inference, a record per frame.
func (p *pipeline) processBatch(ctx context.Context, bt *batch.Batch[sensors.Frame]) {
	g := p.bat
	gen := p.hot.Acquire()
	if gen == nil {
		releaseBatch(bt)
		return
	}
	defer gen.Release()
	eng := gen.Engine
	if g.viewsOf != eng {
		if err := g.bindViews(eng, p.inIdx); err != nil {
			releaseBatch(bt)
			p.stats.inferErrors.Add(1)
			p.errs.log(p.log, "inference failed", "model", gen.Model, "generation", gen.Number, "err", err)
			return
		}
	}
	n := bt.Len()
	if failpoint(ctx, "pipeline/preprocess") {
		releaseBatch(bt)
		return
	}
	t0 := monoNow()
	p.preprocessBatch(t0, bt)
	t1 := monoNow()
	if failpoint(ctx, "pipeline/infer") {
		p.untapBatch(n, "inference skipped")
		return
	}
	err := eng.(trt.Batched).SetBatch(n)
	if err == nil {
		err = eng.Infer(ctx)
	}
	if failpoint(ctx, "pipeline/context-lost") {
		err = fmt.Errorf("failpoint: %w", umem.ErrContextLost)
	}
	if err != nil {
		p.untapBatch(n, "inference failed")
		if ctx.Err() != nil {
			return
		}
		p.stats.inferErrors.Add(1)
		if errors.Is(err, umem.ErrContextLost) {
			p.host.fatal(fmt.Errorf("pipeline %s: the CUDA context is lost (%w); exiting so that systemd restarts edged", p.cfg.Name, err))
			return
		}
		p.errs.log(p.log, "inference failed", "model", gen.Model, "generation", gen.Number, "batch", n, "err", err)
		return
	}
	t2 := monoNow()
	if gen != p.lastGen {
		p.newGeneration(gen)
	}
	for i := range n {
		if e := &g.frames[i]; e.ok {
			p.publishEntry(gen, i, n, bt.Taken, t1, t2)
		}
	}
	p.stampInfer()
	if !p.published.Swap(true) {
		p.state.Store(int32(stateRunning))
		p.host.refreshStatus()
	}
}

// preprocessBatch writes each frame of bt into its entry of the input and
// releases its slot; g.frames says what became of each.
func (p *pipeline) preprocessBatch(now int64, bt *batch.Batch[sensors.Frame]) {
	g := p.bat
	g.gpu = g.gpu[:0]
	for i := range bt.Frames {
		f := &bt.Frames[i]
		lane := g.byIdx[bt.Cameras[i].Index()]
		e := &g.frames[i]
		*e = batchEntry{lane: lane, seq: f.Seq, tCapture: f.TCapture, tReady: f.TReady, arrived: bt.Arrived[i], clock: f.Clock, format: f.Format}
		if e.tReady == 0 {
			e.tReady = e.tCapture
		}
		e.tapped = lane.tapFrame(now, f)
		slot, _ := f.Slot.(frameSlot)
		if p.gpre != nil && slot != nil && p.preKey == (sensors.Format{}) {
			p.choose(*f, slot, g.in[i])
		}
		if p.useGPU && slot != nil {
			slot.SetState(umem.SlotGPU)
			if _, ok := p.gpre.(batchRunner); ok {
				g.gpu = append(g.gpu, preprocess.BatchFrame{Src: slot.Buffer(), N: f.BytesUsed, Format: f.Format, Entry: i})
				continue // released after the batch's launch
			}
			e.transform, e.preErr = p.gpre.Run(slot.Buffer(), f.BytesUsed, f.Format, g.in[i].Buf)
		} else {
			if slot != nil {
				slot.SetState(umem.SlotCPU)
			}
			dst, err := g.in[i].Buf.Host()
			if err == nil {
				e.transform, err = p.pre.Run(f.Data(), f.Format, dst)
			}
			e.preErr = err
		}
		e.ok = e.preErr == nil
		f.Slot.Release()
		*f = sensors.Frame{}
	}
	if len(g.gpu) > 0 {
		err := p.gpre.(batchRunner).RunBatch(g.gpu, g.inBuf(), g.trs)
		for k, bf := range g.gpu {
			e := &g.frames[bf.Entry]
			e.transform, e.preErr, e.ok = g.trs[k], err, err == nil
			f := &bt.Frames[bf.Entry]
			f.Slot.Release()
			*f = sensors.Frame{}
		}
	}
	for i := range bt.Frames {
		e := &g.frames[i]
		if e.preErr != nil {
			p.stats.preErrors.Add(1)
			p.errs.log(p.log, "preprocessing failed", "source", e.lane.scfg.Name, "frame_seq", e.seq, "format", e.format.String(), "err", e.preErr)
			e.lane.untap(e.tapped, e.seq, "preprocessing failed")
			continue
		}
		e.transform = fullResolution(e.transform, e.format)
	}
}

// inBuf is the whole batched input (entry 0's view's memory).
func (g *batchGroup) inBuf() umem.Buffer { return g.in[0].Buf.(entryBuffer).Buffer }

// untapBatch tells the preview that the batch's frames it copied gave no
// result.
func (p *pipeline) untapBatch(n int, why string) {
	for i := range n {
		if e := &p.bat.frames[i]; e.ok {
			e.lane.untap(e.tapped, e.seq, why)
		}
	}
}

// publishEntry post-processes entry i of a batch of n and publishes its
// record: taken is when the batch was formed, t1 and t2 when inference
// began and ended.
func (p *pipeline) publishEntry(gen *trt.Generation, i, n int, taken, t1, t2 int64) {
	g := p.bat
	e := &g.frames[i]
	r := &p.rec
	outs := g.outs[i]
	p.tr = e.transform
	for k, proc := range p.post {
		ts := p.postIn[k][:0]
		for _, j := range p.postOut[k] {
			ts = append(ts, outs[j])
		}
		p.postIn[k] = ts
		proc.Run(ts, &p.tr, &r.Outputs[k])
	}
	r.Source = e.lane.scfg.Name
	r.Engine = stream.EngineRef{Name: gen.Model, Generation: gen.Number, SHA256: p.lastSHA, Batch: n}
	r.FrameSeq, r.TCaptureNs = e.seq, e.tCapture
	r.CaptureClock = ""
	if e.clock != sensors.ClockLocal {
		r.CaptureClock = e.clock.String()
	}
	r.Sensors = r.Sensors[:0]
	for _, ring := range p.rings {
		r.Sensors = ring.Nearest(e.tCapture, int64(p.cfg.SensorWindow.Duration), r.Sensors)
	}
	t3 := monoNow()
	// As process: differences of truncated µs stamps, so the stages
	// (the wait for the batch among them) add up to the total.
	us := func(ns int64) int64 { return ns / 1000 }
	arrived := max(e.arrived, e.tReady)
	r.Latency = stream.Latency{Fill: us(e.tReady) - us(e.tCapture), Queue: us(arrived) - us(e.tReady), Batch: us(max(taken, arrived)) - us(arrived),
		Pre: us(t1) - us(max(taken, arrived)), Infer: us(t2) - us(t1), Post: us(t3) - us(t2), Total: us(t3) - us(e.tCapture)}
	r.TPostNs = t3
	p.observe(e.tCapture, e.tReady, arrived, max(taken, arrived), t1, t2, t3)
	for _, s := range p.sinks {
		s.Publish(r)
	}
	if e.tapped {
		e.lane.tap.Finish(e.seq, r, "")
	}
}

// BatchProblem is err, an engine of pipeline pc that could not be loaded,
// said at the key that decides it when it is about the batch (wrapping
// trt.ErrBatch: a fixed batch dimension or an optimization profile too
// small for the batch): a *config.Error at pipeline[i].batch, or at its
// sources when batch is left to them. Other errors are returned as they
// are.
func BatchProblem(c *config.Config, pc *config.Pipeline, err error) error {
	if err == nil || pc == nil || !pc.Batched() || !errors.Is(err, trt.ErrBatch) {
		return err
	}
	i := indexIn(c.Pipelines, pc)
	key, why := fmt.Sprintf("pipeline[%d].batch", i), ""
	if pc.Batch == 0 {
		key = fmt.Sprintf("pipeline[%d].sources", i)
		why = " (batch is the number of sources when it is not set: set it lower)"
	}
	n, _ := BatchSize(c, pc)
	return &config.Error{Problems: []config.Problem{c.Problem(key, "batch %d does not fit model %q: %v%s", n, pc.Model, err, why)}}
}

// BatchNote says, for edged check, how batched pipeline pc of c runs on
// an engine of batch dimension dim (the zero value: not known); "" for a
// pipeline of one source.
func BatchNote(c *config.Config, pc *config.Pipeline, dim trt.BatchDim) string {
	if !pc.Batched() {
		return ""
	}
	n, capped := BatchSize(c, pc)
	from := "its batch"
	switch {
	case capped:
		from = fmt.Sprintf("the model's fixed batch dimension, fewer than the %d sources", len(pc.Sources))
	case pc.Batch == 0:
		from = "the number of sources"
	}
	s := fmt.Sprintf("batched: cameras %s into one engine, up to %d frames per inference (%s), batch_wait %v",
		strings.Join(pc.Sources, ", "), n, from, pc.BatchWait.Duration)
	if dim.Fixed && dim.Max > n {
		s += fmt.Sprintf("; the model's batch dimension is fixed at %d: every inference runs %d entries, those without a frame padded", dim.Max, dim.Max)
	}
	return s
}
