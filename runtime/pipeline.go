package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/runtime/batch"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/postprocess"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/runtime/preview"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// frameSlot is the frame memory the pipeline hands to the GPU path and
// marks for metrics: a umem pool slot in the daemon.
type frameSlot interface {
	Buffer() umem.Buffer
	SetState(umem.SlotState)
}

// pipelineHost is what a pipeline tells whoever runs it (the daemon): a
// status event for every sink, that the STATUS= line may have changed,
// and a failure nothing on this process can recover from. A pipeline
// needs nothing else of the daemon.
type pipelineHost interface {
	publishStatus(event, pipeline, source, reason string)
	refreshStatus()
	fatal(err error)
}

// pipelineState is what a pipeline is doing, for STATUS= and /readyz.
type pipelineState int32

const (
	stateStarting pipelineState = iota
	stateWaiting                // source absent or reconnecting
	stateRunning                // has published at least one result since its source came up
)

// pipeline runs source -> preprocess -> engine -> postprocess -> sinks.
// It owns two goroutines: capture (source supervision and frame delivery)
// and infer (everything after the mailbox).
type pipeline struct {
	host  pipelineHost
	stall time.Duration  // daemon.stall_timeout of the configuration this pipeline belongs to
	conf  *config.Config // the configuration this pipeline belongs to
	cfg   *config.Pipeline
	scfg  *config.Source
	log   *slog.Logger
	src   sensors.Source
	pool  *umem.Pool
	// poolMu guards pool's replacement (regrow.go), which only the
	// capture goroutine does: other goroutines read it through framePool.
	poolMu sync.Mutex
	alloc  umem.Allocator // what pool came from (frames, frames.go)
	// frameAlloc asks the daemon for alloc (daemon.frameAllocator), once.
	frameAlloc func() (umem.Allocator, error)
	// readBack holds a copy of a frame in device memory for a CPU
	// consumer (hostBytes); grown once, never per frame.
	readBack []byte

	decodeLogged bool // logDecoder said which MJPEG decoder serves; start, then the capture goroutine
	hot          *trt.Hot
	// newGPU builds the GPU preprocessing path (Factories.GPUPreprocess);
	// nil: the CPU path always.
	newGPU func(preprocess.Options, umem.Allocator, *config.Config) (GPUPreprocessor, error)
	sinks  []Sink
	rings  []*sensors.Ring
	mb     mailbox
	// bat is a batched pipeline's cameras (pipeline_batch.go), shared by
	// its lanes; nil for a pipeline of one source. cam is this lane's
	// place in its Batcher.
	bat *batchGroup
	cam batch.Camera

	// fixed at start from the engine signature
	inIdx     int
	c, h, w   int
	pre       *preprocess.Preprocessor // the CPU path
	gpre      GPUPreprocessor          // the GPU path; nil without a GPU or with device = "cpu"
	useGPU    bool                     // the path chosen for preKey
	preKey    sensors.Format           // the frame format the choice was made for
	tr        preprocess.Transform     // of the frame being processed
	post      []*postprocess.Processor
	postOut   [][]int         // engine output indices per processor
	postIn    [][]*trt.Tensor // the tensors of each processor, refilled per frame (no allocation)
	postMeta  *trt.Metadata   // the model metadata the post-processors were planned with
	rec       stream.Record
	lastGen   *trt.Generation
	lastSHA   string
	sourceUp  atomic.Bool
	state     atomic.Int32
	published atomic.Bool
	// Why the source is down (its last error), and the format it
	// delivers while up: for the preview's page, which reads them from
	// another goroutine.
	downWhy atomic.Pointer[string]
	format  atomic.Pointer[string]
	started int64 // when startPipeline started it (CLOCK_MONOTONIC ns)

	// tap hands frames to the live preview while somebody watches (nil:
	// no preview, as in tests); previewMatrix is how it reads YUV.
	tap           *preview.Tap
	previewMatrix preview.Matrix

	// progress stamps (CLOCK_MONOTONIC ns) for the watchdog
	captureStamp atomic.Int64
	inferStamp   atomic.Int64

	stats pipelineStats
	met   pipelineMetrics // histograms, made by bind before the first frame
	rate  rateMeter
	errs  rateLog
	rs    restarts     // the source's restarts (the capture goroutine; startPipeline before it)
	skips rateLog      // frames the source skipped (sensors.ErrSkipped)
	life  pipelineLife // reload keys and the two goroutines (graph.go)
	perf  perfWatch    // achieved against requested frame rate (perf.go)
}

type pipelineStats struct {
	captured, results, inferErrors, preErrors atomic.Uint64
	droppedStale, droppedCorrupt              atomic.Uint64
	reconnects                                atomic.Uint64
	// inferN frames took inferNs in the engine: the slow-pipeline check
	// reads them (perf.go).
	inferN  atomic.Uint64
	inferNs atomic.Int64
}

type poolAdapter struct{ p *umem.Pool }

// TryGet leases a free slot if one is available now (V4L2 uses it to
// requeue without waiting).
func (a poolAdapter) TryGet() (sensors.Slot, bool) {
	s, ok := a.p.TryGet()
	if !ok {
		return nil, false
	}
	return s, true
}

// SlotSize is the bytes of each slot (a replay refuses at Start frames
// that do not fit).
func (a poolAdapter) SlotSize() int { return a.p.SlotSize() }

func (a poolAdapter) Get(ctx context.Context) (sensors.Slot, error) {
	s, err := a.p.Get(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// mailbox hands frames from capture to inference. In latest mode it holds
// one frame and a newer frame replaces (and releases) an unconsumed one.
type mailbox struct {
	ch     chan sensors.Frame
	latest bool
}

func newMailbox(latest bool, depth int) mailbox {
	if latest {
		depth = 1
	}
	return mailbox{ch: make(chan sensors.Frame, depth), latest: latest}
}

// put delivers f; it reports how many older frames were dropped.
func (m *mailbox) put(ctx context.Context, f sensors.Frame) (dropped int, ok bool) {
	if !m.latest {
		select {
		case m.ch <- f:
			return 0, true
		case <-ctx.Done():
			f.Slot.Release()
			return 0, false
		}
	}
	for {
		select {
		case m.ch <- f:
			return dropped, true
		default:
		}
		select {
		case old := <-m.ch:
			old.Slot.Release()
			dropped++
		default:
		}
	}
}

// drain releases frames left in the mailbox.
func (m *mailbox) drain() {
	for {
		select {
		case f := <-m.ch:
			f.Slot.Release()
		default:
			return
		}
	}
}

// capture supervises the source: it delivers frames, and on failure closes
// the source, waits with capped, jittered backoff and starts it again
// (restarts: a source that fails at once after every start backs off as
// one that cannot be started, and is announced once).
func (p *pipeline) capture(ctx context.Context) {
	for ctx.Err() == nil {
		if !p.sourceUp.Load() {
			if err := p.src.Start(ctx, poolAdapter{p.pool}); err != nil {
				if ctx.Err() != nil {
					return
				}
				d := p.rs.startFailed()
				p.rs.errs.log(p.log, "source start failed; retrying", "source", p.scfg.Name, "retry_in", d.Round(time.Millisecond).String(), "err", err)
				p.setWaiting(err)
				if !p.sleep(ctx, d) {
					return
				}
				continue
			}
			p.sourceUpEvent(p.rs.started())
			p.logDecoder()
		}
		err := p.deliver(ctx)
		if ctx.Err() != nil {
			return
		}
		announce, d := p.rs.ended()
		p.sourceDownEvent(err, announce, d)
		p.src.Close()
		if p.regrow(ctx, err) {
			d = 0 // the new pool holds its frames: start it again at once
		}
		if errors.Is(err, sensors.ErrEOF) {
			// A finite replay ended: nothing more will come, and waiting
			// for nothing is not a stall.
			for p.sleep(ctx, time.Hour) {
			}
			return
		}
		if d > 0 && !p.sleep(ctx, d) {
			return
		}
	}
}

// deliver moves frames from the source into the mailbox until an error.
func (p *pipeline) deliver(ctx context.Context) error {
	for {
		f, err := p.src.Next(ctx)
		if errors.Is(err, sensors.ErrSkipped) && ctx.Err() == nil {
			// One unusable frame (a damaged or oversized image): counted,
			// said at most once per 10 s, and the source goes on.
			p.stampCapture()
			p.stats.droppedCorrupt.Add(1)
			p.skips.log(p.log, "frame skipped", "source", p.scfg.Name, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		p.stampCapture()
		p.stats.captured.Add(1)
		if p.rs.delivering() {
			p.announceUp() // a flapping source has been stable long enough
		}
		if f.Flags&(sensors.FlagError|sensors.FlagShort) != 0 {
			f.Slot.Release()
			p.stats.droppedCorrupt.Add(1)
			continue
		}
		if s, ok := f.Slot.(frameSlot); ok {
			s.SetState(umem.SlotReady)
		}
		var n int
		var ok bool
		if p.bat != nil {
			n, ok = p.putBatch(ctx, f)
		} else {
			n, ok = p.mb.put(ctx, f)
		}
		if n > 0 {
			p.head().stats.droppedStale.Add(uint64(n))
		}
		if !ok {
			return ctx.Err()
		}
	}
}

func (p *pipeline) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(p.idle())
	defer tick.Stop()
	for {
		p.stampCapture() // waiting for a device is legitimate progress
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-tick.C:
		}
	}
}

func (p *pipeline) idle() time.Duration {
	return max(p.stall/4, 50*time.Millisecond)
}

// progress returns when (CLOCK_MONOTONIC ns) the capture and inference
// loops last made progress, for the watchdog, /livez and
// edged_pipeline_progress_age_seconds. A source that waits by design for
// its next frame (sensors.Pacer: a recorded pause of an hour, a slow
// frame rate, a camera's poll) is making progress now: only a loop stuck
// in a call is not.
func (p *pipeline) progress(now int64) (capture, infer int64) {
	capture, infer = now, p.inferStamp.Load()
	for _, l := range p.lanesOf() { // a batched pipeline: its least recent camera
		c := l.captureStamp.Load()
		if pc, ok := l.src.(sensors.Pacer); ok && pc.Pacing() {
			c = now
		}
		capture = min(capture, c)
	}
	return capture, infer
}
func (p *pipeline) stampCapture() { p.captureStamp.Store(monoNow()) }
func (p *pipeline) stampInfer()   { p.inferStamp.Store(monoNow()) }

func (p *pipeline) setWaiting(err error) {
	p.state.Store(int32(stateWaiting))
	p.setDownWhy(err)
	p.host.refreshStatus()
}

// setDownWhy keeps why the source is down (nil: it is up).
func (p *pipeline) setDownWhy(err error) {
	if err == nil {
		p.downWhy.Store(nil)
		return
	}
	why := err.Error()
	p.downWhy.Store(&why)
}

// sourceUpEvent records a start of the source; announce: it is news
// (restarts.started), logged and sent to the sinks as source_up.
func (p *pipeline) sourceUpEvent(announce bool) {
	p.sourceUp.Store(true)
	p.setDownWhy(nil)
	f := p.src.Format().String()
	p.format.Store(&f)
	p.stats.reconnects.Add(1)
	if announce {
		p.announceUp()
	}
	p.host.refreshStatus()
}

func (p *pipeline) announceUp() {
	p.log.Info("source up", "source", p.scfg.Name, "event", "source_up", "format", p.src.Format().String())
	p.host.publishStatus("source_up", p.cfg.Name, p.scfg.Name, "")
}

// batchLive tells a batched pipeline's Batcher whether this lane's camera
// delivers (batches stop waiting for one that is down).
func (p *pipeline) batchLive(live bool) {
	if p.bat != nil && p.bat.b != nil {
		p.bat.b.SetLive(p.cam, live)
	}
}

// sourceDownEvent records the end of a run of the source (err: why);
// announce: it is news (restarts.ended), logged and sent as source_down;
// otherwise the source fails again while it is down, and that is logged
// at most once per 10 s with the delay before the next start, retry.
func (p *pipeline) sourceDownEvent(err error, announce bool, retry time.Duration) {
	p.sourceUp.Store(false)
	p.batchLive(false)
	if h := p.head(); h == p || h.allDown() {
		// A batched pipeline waits when all its cameras are down; while
		// one delivers it runs (STATUS= names the others).
		h.published.Store(false)
		h.state.Store(int32(stateWaiting))
	}
	reason := "stopped"
	if err != nil {
		reason = err.Error()
	}
	p.downWhy.Store(&reason)
	if announce {
		p.log.Warn("source down", "source", p.scfg.Name, "event", "source_down", "err", err)
		p.host.publishStatus("source_down", p.cfg.Name, p.scfg.Name, reason)
	} else {
		p.rs.errs.log(p.log, "source failed again soon after it started; retrying", "source", p.scfg.Name,
			"retry_in", retry.Round(time.Millisecond).String(), "err", err)
	}
	p.host.refreshStatus()
}

// infer takes frames from the mailbox and produces results.
func (p *pipeline) infer(ctx context.Context) {
	idle := p.idle()
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		t.Reset(idle)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.stampInfer() // idle: waiting for frames is progress
			continue
		case f := <-p.mb.ch:
			t0 := monoNow()
			p.process(ctx, f)
			p.perf.processed(monoNow() - t0)
		}
	}
}

func (p *pipeline) process(ctx context.Context, f sensors.Frame) {
	t0 := monoNow()
	gen := p.hot.Acquire()
	if gen == nil {
		f.Slot.Release()
		return
	}
	defer gen.Release()
	eng := gen.Engine
	if failpoint(ctx, "pipeline/preprocess") {
		f.Slot.Release()
		return
	}
	tapped := p.tapFrame(t0, &f)
	var err error
	p.tr, err = p.preprocess(f, eng.Inputs()[p.inIdx])
	p.tr = fullResolution(p.tr, f.Format)
	frameSeq, tCapture, tReady, clk := f.Seq, f.TCapture, f.TReady, f.Clock
	f.Slot.Release()
	if err != nil {
		p.stats.preErrors.Add(1)
		p.errs.log(p.log, "preprocessing failed", "frame_seq", frameSeq, "format", f.Format.String(), "err", err)
		p.untap(tapped, frameSeq, "preprocessing failed")
		return
	}
	if tReady == 0 {
		tReady = tCapture
	}
	t1 := monoNow()
	if failpoint(ctx, "pipeline/infer") {
		p.untap(tapped, frameSeq, "inference skipped")
		return
	}
	err = eng.Infer(ctx)
	if failpoint(ctx, "pipeline/context-lost") {
		err = fmt.Errorf("failpoint: %w", umem.ErrContextLost)
	}
	if err != nil {
		p.untap(tapped, frameSeq, "inference failed")
		if ctx.Err() != nil {
			return
		}
		p.stats.inferErrors.Add(1)
		if errors.Is(err, umem.ErrContextLost) {
			// A sticky CUDA error: nothing on this context works again.
			p.host.fatal(fmt.Errorf("pipeline %s: the CUDA context is lost (%w); exiting so that systemd restarts edged", p.cfg.Name, err))
			return
		}
		p.errs.log(p.log, "inference failed", "model", gen.Model, "generation", gen.Number, "err", err)
		return
	}
	t2 := monoNow()
	if gen != p.lastGen {
		p.newGeneration(gen)
	}
	r := &p.rec
	outs := eng.Outputs()
	for i, proc := range p.post {
		ts := p.postIn[i][:0]
		for _, j := range p.postOut[i] {
			ts = append(ts, outs[j])
		}
		p.postIn[i] = ts
		proc.Run(ts, &p.tr, &r.Outputs[i])
	}
	r.Engine = stream.EngineRef{Name: gen.Model, Generation: gen.Number, SHA256: p.lastSHA}
	r.FrameSeq, r.TCaptureNs = frameSeq, tCapture
	r.CaptureClock = ""
	if clk != sensors.ClockLocal {
		r.CaptureClock = clk.String() // a constant: nothing allocated
	}
	r.Sensors = r.Sensors[:0]
	for _, ring := range p.rings {
		r.Sensors = ring.Nearest(tCapture, int64(p.cfg.SensorWindow.Duration), r.Sensors)
	}
	t3 := monoNow()
	// Each stage is the difference of truncated µs stamps, so the stages
	// add up to the total; the sink adds encode and the total as it
	// encodes (stream.Record.TPostNs).
	us := func(ns int64) int64 { return ns / 1000 }
	r.Latency = stream.Latency{Fill: us(tReady) - us(tCapture), Queue: us(t0) - us(tReady), Pre: us(t1) - us(t0),
		Infer: us(t2) - us(t1), Post: us(t3) - us(t2), Total: us(t3) - us(tCapture)}
	r.TPostNs = t3
	// Counted before it is handed to the sinks: a client that has seen a
	// result finds it in edged_results_total.
	p.observe(tCapture, tReady, t0, t0, t1, t2, t3)
	for _, s := range p.sinks {
		s.Publish(r)
	}
	if tapped {
		p.tap.Finish(frameSeq, r, "")
	}
	p.stampInfer()
	if !p.published.Swap(true) {
		p.state.Store(int32(stateRunning))
		p.host.refreshStatus()
	}
}

// tapFrame hands f to the live preview when a viewer wants a picture now
// (one atomic load otherwise), reading the slot where the pipeline reads
// it anyway: on the host, before preprocessing and before the slot is
// released. A slot the host may not read now (a CUDA stream owns it) is
// not read: Host checks umem's ownership rules. A slot in device memory
// (NVDEC's pictures) is copied out (hostBytes), at the preview's rate.
func (p *pipeline) tapFrame(now int64, f *sensors.Frame) bool {
	if !p.tap.Due(now) {
		return false
	}
	var data []byte
	if s, ok := f.Slot.(frameSlot); ok {
		h, err := p.hostBytes(s.Buffer(), f.BytesUsed)
		if err != nil {
			p.tap.Skip(fmt.Errorf("frame memory not readable on the host: %w", err))
			return false
		}
		data = h
	} else {
		data = f.Data()
	}
	return p.tap.Copy(now, preview.Frame{Seq: f.Seq, TCapture: f.TCapture, Format: f.Format, Data: data, Matrix: p.previewMatrix})
}

// untap tells the preview the frame it copied (tapped) gave no result,
// and why: the picture is shown without one.
func (p *pipeline) untap(tapped bool, seq uint64, why string) {
	if tapped {
		p.tap.Finish(seq, nil, why)
	}
}

// bind fixes the tensor layout from the first engine and builds the
// preprocessors and post-processors, as planEngine decides. Later engines
// must have the same signature.
func (p *pipeline) bind(eng trt.Engine) error {
	plan, err := planEngine(p.conf, p.cfg, trt.SignatureOf(eng), trt.MetadataOf(eng))
	if err == nil && p.bat != nil {
		err = p.bat.bindViews(eng, plan.in)
		if err != nil {
			err = fmt.Errorf("%w: pipeline %q: %w", config.ErrInvalid, p.cfg.Name, err)
		}
	}
	if err != nil {
		return err
	}
	if p.met.latency == nil {
		p.met = newPipelineMetrics(p.cfg.Name, p.bat != nil)
	}
	p.inIdx = plan.in
	p.c, p.h, p.w = plan.pre.Out.C, plan.pre.Out.H, plan.pre.Out.W
	if err := p.newPreprocessors(plan.pre); err != nil {
		return err
	}
	for _, l := range p.lanesOf() {
		if l.src != nil {
			l.c, l.h, l.w = p.c, p.h, p.w
			l.announceInput()
		}
	}
	if err := p.bindPost(plan, eng); err != nil {
		return err
	}
	p.postMeta = trt.MetadataOf(eng)
	for _, n := range plan.notes {
		p.log.Info("post-processing", "model", p.cfg.Model, "note", n)
	}
	return nil
}

// bindPost builds the post-processors of plan for eng's outputs and the
// record they fill.
func (p *pipeline) bindPost(plan enginePlan, eng trt.Engine) error {
	outs := planSignature(p.cfg, eng).Outputs
	post := make([]*postprocess.Processor, 0, len(plan.post))
	postOut := make([][]int, 0, len(plan.post))
	postIn := make([][]*trt.Tensor, 0, len(plan.post))
	for _, pp := range plan.post {
		specs := make([]trt.TensorSpec, len(pp.outputs))
		for k, j := range pp.outputs {
			specs[k] = outs[j]
		}
		proc, err := postprocess.New(specs, pp.opts)
		if err != nil { // planEngine built it already
			return fmt.Errorf("%w: pipeline %q: %w", config.ErrInvalid, p.cfg.Name, err)
		}
		post = append(post, proc)
		postOut = append(postOut, pp.outputs)
		postIn = append(postIn, make([]*trt.Tensor, 0, len(pp.outputs)))
	}
	p.post, p.postOut, p.postIn = post, postOut, postIn
	p.rec = stream.Record{Kind: stream.KindResult, Device: p.conf.Daemon.DeviceID, Pipeline: p.cfg.Name, Outputs: make([]stream.Output, len(p.post)),
		Sensors: make([]sensors.Sample, 0, len(p.rings))}
	return nil
}

// newGeneration notes the engine generation results now come from. An
// engine whose model file says something else about itself than the one
// the post-processors were planned with (class names, task) gets them
// planned again: the reload accepted it (Target.Accept runs planEngine),
// so the plan holds. It runs on the infer goroutine, which owns them, once
// per reload.
func (p *pipeline) newGeneration(gen *trt.Generation) {
	first := p.lastGen == nil
	p.lastGen, p.lastSHA = gen, gen.SHAPrefix()
	md := trt.MetadataOf(gen.Engine)
	if first || reflect.DeepEqual(md, p.postMeta) {
		return
	}
	plan, err := planEngine(p.conf, p.cfg, trt.SignatureOf(gen.Engine), md)
	if err == nil {
		err = p.bindPost(plan, gen.Engine)
	}
	if err != nil {
		p.log.Error("the new engine's post-processing could not be planned; keeping the previous one", "model", gen.Model,
			"generation", gen.Number, "err", err)
		return
	}
	p.postMeta = md
	for _, n := range plan.notes {
		p.log.Info("post-processing", "model", gen.Model, "generation", gen.Number, "note", n)
	}
}

// acceptEngine is the pipeline's reload.Target.Accept: an engine it cannot
// plan (its metadata's class names do not fit its outputs, say) is
// rejected before it serves.
func (p *pipeline) acceptEngine(e trt.Engine) error {
	_, err := planEngine(p.conf, p.cfg, trt.SignatureOf(e), trt.MetadataOf(e))
	return err
}
