package reload

import (
	"github.com/edged-dev/edged/trt"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edged-dev/edged/internal/backoff"
)

// Target is one consumer of a model file: a pipeline's Hot, the signature
// the pipeline was built for and the options its engines are loaded with.
// Each target gets its own engine (bound to its own tensors, used by one
// goroutine at a time), and the targets' engines share one loaded model
// where the backend's engines can (trt.Sharer): the file is loaded and
// validated once per change for all of them (StageSet), and a change is
// installed in every target at once, as one generation, or in none.
type Target struct {
	// Name names the target (the pipeline) in events.
	Name string
	// Hot receives the engines. The Reloader never closes it.
	Hot *trt.Hot
	// Want is the signature every engine must have. When empty, the
	// first engine installed (normally by Load) fixes it.
	Want trt.Signature
	// Load is passed to Backend.Load; an empty Name becomes the model
	// name.
	Load trt.LoadOptions
	// Accept, when set, is asked about every engine that passed Stage
	// before it is installed: the pipeline checks that it can use the
	// engine as its model file describes it (class names, format). An
	// error rejects the engine (ErrSignature).
	Accept func(trt.Engine) error
}

// Options configure a Reloader.
type Options struct {
	// Path is the model file. It may be a symlink, followed on every
	// check; its folder may be a symlink too, or be replaced whole (a
	// rename of another folder or symlink over its name): the folder
	// above is watched for that.
	Path string
	// Model names the model in events and errors; "" means the file name.
	Model string
	// Backend loads the engines.
	Backend trt.Backend
	// Targets receive the engines; at least one.
	Targets []Target
	// Peers are Hots of other consumers of the same model file that this
	// Reloader does not install into (pipelines whose engines carried
	// over a configuration reload): content one of them serves is shared
	// from its engine instead of being loaded again, and generations are
	// numbered on from theirs, so every pipeline of a model counts one
	// generation.
	Peers []*trt.Hot

	// Debounce is how long the folder must be quiet after the last event
	// before the file is checked; 0 means 250 ms.
	Debounce time.Duration
	// Settle is the interval across which size, mtime and inode must stay
	// the same before the file is read; 0 means 100 ms.
	Settle time.Duration
	// Grace is how long a file written in place is waited for: when a
	// file modified in place (same inode as the version read before, or
	// a file that was not there) less than Grace ago is rejected, the
	// rejection is held and the file polled until Grace has passed since
	// its modification; if it changes meanwhile, the rejection is dropped
	// (OutcomeIncomplete) and the new content checked. 0 means
	// DefaultGrace, a negative value disables it.
	Grace time.Duration
	// Rescan is the period of the safety-net rescan while file events
	// work (it stats the file and reads it only when the stat changed);
	// 0 means 30 s, a negative value disables it.
	Rescan time.Duration
	// Poll is the rescan period while file events are unavailable; 0
	// means 2 s.
	Poll time.Duration
	// WarmupTimeout bounds the warm-up inference; 0 means 60 s.
	WarmupTimeout time.Duration
	// MaxBytes bounds the model file size: a larger file is rejected
	// (ErrTooLarge) without being read. 0 means DefaultMaxBytes.
	MaxBytes int64
	// Budget is asked with the file size before the file is read and
	// again before each staging; nil means MemInfoBudget{}.Check (system
	// memory, right for Jetson and CPU backends).
	Budget Budget
	// Gate bounds concurrent stagings; nil means the process-wide gate of
	// one, shared by every Reloader.
	Gate *StagingGate
	// OnEvent receives every event, one at a time, on the Reloader's
	// goroutine. It must return quickly and must not call Load or Close.
	OnEvent func(Event)
}

// Defaults of Options.
const (
	DefaultDebounce      = 250 * time.Millisecond
	DefaultSettle        = 100 * time.Millisecond
	DefaultRescan        = 30 * time.Second
	DefaultPoll          = 2 * time.Second
	DefaultWarmupTimeout = 60 * time.Second
	DefaultGrace         = 10 * time.Second
)

// giveBackBytes is the size of a read after which the memory is handed
// back to the system at once.
const giveBackBytes = 16 << 20

// giveBack returns the memory of a read of n bytes to the system when n is
// large. Call it once the bytes are no longer referenced. Without it Go
// keeps the pages: after one large allocation the next garbage collection
// is due only when the heap doubles again, which can be minutes away, and
// on a Jetson those pages are the GPU's memory too.
func giveBack(n int) {
	if n >= giveBackBytes {
		debug.FreeOSMemory()
	}
}

// checkKind orders why a check runs; a stronger reason wins when several
// are pending.
type checkKind int

const (
	kindNone   checkKind = iota
	kindRescan           // periodic: skipped when stat is unchanged
	kindEvent            // a file event or a watcher error: read and hash
	kindManual           // Trigger: also re-validates quarantined content
)

type target struct {
	Target
	bad         [32]byte
	quarantined bool
	judged      judgement // why bad was rejected, for a manual check of it
}

// judgement is a rejection made final, remembered so that a manual check
// of the same content says so instead of judging it again.
type judgement struct {
	at     time.Time
	reason error
}

// again is the reason of OutcomeUnchanged for content judged before.
func (j judgement) again() error { return &Judged{At: j.at, Err: j.reason} }

// Judged is the reason of an OutcomeUnchanged for content rejected before
// and not changed since: it is not judged again.
type Judged struct {
	At  time.Time // when it was rejected
	Err error     // why
}

func (j *Judged) Error() string {
	return fmt.Sprintf("unchanged since it was rejected %s ago (not judged again; change the file to have it checked): %v", time.Since(j.At).Round(time.Second), j.Err)
}

// Unwrap returns why the content was rejected.
func (j *Judged) Unwrap() error { return j.Err }

// preRejected reports whether err is a rejection made before the file was
// read whole (readModel: too large, over the memory budget, refused by the
// backend's Sniffer), as opposed to an I/O error.
func preRejected(err error) bool { return trt.RejectReason(err) != trt.ReasonOther }

// Reloader keeps the engines of one model file's targets in step with the
// file. Load installs the first engines; Start watches the file's folder
// and reloads on change; every reload is a transaction that either
// installs a validated, warmed-up engine or leaves the serving one alone.
//
// Changes are found by fsnotify on the parent folder (never on the file)
// and on the folder above it (where a swap of the whole folder, or of a
// symlink to it, shows), a periodic rescan and Trigger. A file is read only once it has been
// quiet for Debounce and its stat stayed the same across Settle; it is read
// once, and the same bytes are hashed and loaded. Content identical to the
// serving engine's is skipped; content that was rejected is quarantined
// until the file changes or disappears and comes back (memory and backend
// failures are not quarantined: they are retried at each rescan).
type Reloader struct {
	opts     Options
	model    string
	path     string // absolute, clean
	dir      string // filepath.Dir(path)
	pdir     string // filepath.Dir(dir): watched too, to see dir replaced
	targets  []*target
	stage    StageOptions
	onEvent  func(Event)
	interval [2]time.Duration // rescan period while watching, while polling

	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // file may have changed (cap 1)
	trig   chan struct{} // Trigger (cap 1)
	inject chan error    // extra watcher errors (tests)

	kickSeq  atomic.Uint64
	full     atomic.Bool
	linked   atomic.Bool
	dirLost  atomic.Bool
	pdirLost atomic.Bool
	resolved atomic.Pointer[string]

	startOnce  sync.Once
	closeOnce  sync.Once
	workerDone chan struct{}
	drainWG    sync.WaitGroup

	txMu       sync.Mutex // serialises Load and checks; guards the fields below
	w          watcher
	watching   bool        // r.dir is watched
	pwatching  bool        // r.pdir is watched
	watchedDir os.FileInfo // r.dir when its watch was added, nil if unknown
	watchedP   os.FileInfo // r.pdir when its watch was added
	extraDir   string
	polling    bool
	last       fileKey
	preBad     fileKey   // rejected before it was read whole; quarantined
	preJudged  judgement // why preBad was rejected
	missingNow bool
	unreadable string
	retry      bool

	statsMu sync.Mutex
	stats   Stats

	newWatcher func() (watcher, error)
	checkHook  func(start time.Time)
}

// New validates opts and returns a Reloader that does nothing
// until Load or Start.
func New(opts Options) (*Reloader, error) {
	if opts.Path == "" {
		return nil, errors.New("trt: reloader: no model path")
	}
	if opts.Backend == nil {
		return nil, fmt.Errorf("trt: reloader for %s: no backend", opts.Path)
	}
	if len(opts.Targets) == 0 {
		return nil, fmt.Errorf("trt: reloader for %s: no targets", opts.Path)
	}
	abs, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("trt: reloader: model path %s: %w", opts.Path, err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&opts.Debounce, DefaultDebounce)
	def(&opts.Settle, DefaultSettle)
	def(&opts.Rescan, DefaultRescan)
	def(&opts.Poll, DefaultPoll)
	def(&opts.WarmupTimeout, DefaultWarmupTimeout)
	def(&opts.Grace, DefaultGrace)
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = trt.DefaultMaxBytes
	}
	if opts.Model == "" {
		opts.Model = filepath.Base(abs)
	}
	if opts.Budget == nil {
		opts.Budget = MemInfoBudget{}.Check
	}
	if opts.Gate == nil {
		opts.Gate = processGate
	}
	r := &Reloader{
		opts:       opts,
		model:      opts.Model,
		path:       abs,
		dir:        filepath.Dir(abs),
		pdir:       filepath.Dir(filepath.Dir(abs)),
		stage:      StageOptions{Backend: opts.Backend, Budget: opts.Budget, Gate: opts.Gate, WarmupTimeout: opts.WarmupTimeout},
		onEvent:    opts.OnEvent,
		kick:       make(chan struct{}, 1),
		trig:       make(chan struct{}, 1),
		inject:     make(chan error, 16),
		newWatcher: newFSWatcher,
		stats:      Stats{RejectedBy: map[string]uint64{}},
	}
	r.interval = [2]time.Duration{opts.Rescan, opts.Poll}
	if opts.Rescan < 0 {
		r.interval[0] = math.MaxInt64
	}
	for i, t := range opts.Targets {
		if t.Hot == nil {
			return nil, fmt.Errorf("trt: reloader for %s: target %d (%q) has no Hot", opts.Path, i, t.Name)
		}
		if t.Load.Name == "" {
			t.Load.Name = opts.Model
		}
		r.targets = append(r.targets, &target{Target: t})
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Want returns the signature target i's engines must have: Target.Want,
// or the signature of the first engine installed when that was empty.
func (r *Reloader) Want(i int) trt.Signature {
	r.txMu.Lock()
	defer r.txMu.Unlock()
	return r.targets[i].Want
}

// Load reads the model file now and stages and installs an engine for
// every target that does not already serve this content, through the same
// validation and warm-up as a reload, with no debounce. It is the start-up
// path: the error names the model, the file and the reason (wrapping a trt
// sentinel, fs.ErrNotExist or ctx's error), and nothing is quarantined.
func (r *Reloader) Load(ctx context.Context) error {
	r.txMu.Lock()
	defer r.txMu.Unlock()
	for holds := 0; ; holds++ {
		key, n, err := r.load(ctx)
		giveBack(n) // the bytes read are not referenced any more
		if err == nil || ctx.Err() != nil || !holdable(err) {
			return err
		}
		h := r.hold(ctx, fileKey{}, key)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !h.changed || holds == maxStartHolds:
			return h.final(err)
		}
		// The file was still being written: read it again.
	}
}

// maxStartHolds bounds how often Load reads a file again that changed
// while a rejection of it was held, so a file written forever does not
// hold up the start for more than about maxStartHolds × Grace.
const maxStartHolds = 3

// load is Load without the holds; key is the version read and n the
// number of bytes read.
func (r *Reloader) load(ctx context.Context) (key fileKey, n int, _ error) {
	var (
		data []byte
		err  error
	)
	for attempt := 0; ; attempt++ {
		key, err = statFile(r.path)
		if err == nil {
			data, key, err = r.readModel(key)
		}
		if !errors.Is(err, errUnstable) || attempt == 4 {
			break
		}
		if !backoff.Sleep(ctx, r.opts.Settle) {
			return key, 0, ctx.Err()
		}
	}
	r.updateLink()
	n = len(data)
	switch {
	case err == nil:
	case missing(err):
		return key, n, fmt.Errorf("trt: model %s: %s does not exist (%w); check the model path", r.model, r.opts.Path, err)
	case errors.Is(err, errUnstable):
		return key, n, fmt.Errorf("trt: model %s: %s kept changing while being read; write it under a temporary name and rename it into place: %w", r.model, r.opts.Path, err)
	case preRejected(err):
		return key, n, fmt.Errorf("trt: model %s: %s rejected: %w", r.model, r.opts.Path, err)
	default:
		return key, n, fmt.Errorf("trt: model %s: cannot read %s: %w", r.model, r.opts.Path, err)
	}
	sha := sha256.Sum256(data)
	var need []*target
	for _, t := range r.targets {
		if cur := t.Hot.Current(); cur == nil || cur.SHA256 != sha {
			need = append(need, t)
		}
	}
	if len(need) > 0 {
		if t, err := r.apply(ctx, need, data, sha); err != nil {
			if ctx.Err() != nil {
				return key, n, ctx.Err()
			}
			return key, n, fmt.Errorf("trt: model %s: %s (sha256 %s) rejected for %s: %w", r.model, r.opts.Path, hex.EncodeToString(sha[:6]), t.label(), err)
		}
	}
	r.last = key
	r.missingNow = false
	return key, n, nil
}

func (t *target) label() string {
	if t.Name == "" {
		return "its pipeline"
	}
	return "pipeline " + t.Name
}

// apply stages data for the targets ts together (StageSet: the model
// loaded and validated once, every target's engine shared from it, or
// from an engine already serving this content) and installs it in all of
// them as one generation. On error nothing is installed, and failed is
// the target whose engine or Accept refused it. Called with txMu held.
func (r *Reloader) apply(ctx context.Context, ts []*target, data []byte, sha [32]byte) (failed *target, _ error) {
	from, number := r.donor(sha)
	var base trt.Engine
	if from != nil {
		defer from.Release()
		base = from.Engine
	}
	loads := make([]trt.LoadOptions, len(ts))
	wants := make([]trt.Signature, len(ts))
	hots := make([]*trt.Hot, len(ts))
	for i, t := range ts {
		loads[i], wants[i], hots[i] = t.Load, t.Want, t.Hot
	}
	set, i, err := StageSet(ctx, data, base, loads, wants, r.stage)
	if err != nil {
		if i == 0 {
			return ts[0], err // the model itself
		}
		return ts[i], r.named(ts, i, err)
	}
	for i, t := range ts {
		if t.Accept == nil {
			continue
		}
		if err := t.Accept(set.Engines[i]); err != nil {
			set.Close()
			if !errors.Is(err, trt.ErrSignature) {
				err = fmt.Errorf("%w: %w", trt.ErrSignature, err)
			}
			return t, r.named(ts, i, err)
		}
	}
	set.Install(hots, r.model, sha, number)
	for i, t := range ts {
		if unset(t.Want) {
			t.Want = trt.SignatureOf(set.Engines[i])
		}
	}
	return nil, nil
}

// named says which target refused content that several targets share,
// so that every target's rejection tells whose engine failed.
func (r *Reloader) named(ts []*target, i int, err error) error {
	if len(ts) < 2 || ts[i].Name == "" {
		return err
	}
	return fmt.Errorf("for pipeline %s: %w", ts[i].Name, err)
}

// donor finds an engine already serving content sha among the targets
// and peers, leased (the caller releases it), and the generation number
// the content is installed as: the donor's, so every pipeline of the
// model counts the same generation, or one more than the highest any of
// them serves.
func (r *Reloader) donor(sha [32]byte) (*trt.Generation, uint64) {
	var hi uint64
	hots := slices.Clone(r.opts.Peers)
	for _, t := range r.targets {
		hots = append(hots, t.Hot)
	}
	for _, h := range hots {
		g := h.Acquire()
		if g == nil {
			continue
		}
		if g.SHA256 == sha {
			return g, g.Number
		}
		hi = max(hi, g.Number)
		g.Release()
	}
	return nil, hi + 1
}

// Start begins watching the model file. It returns at once; changes are
// reported through OnEvent. Start after Close does nothing.
func (r *Reloader) Start() {
	r.startOnce.Do(func() {
		if r.ctx.Err() != nil {
			return
		}
		r.workerDone = make(chan struct{})
		go r.run()
	})
}

// Trigger asks for a check now (after the debounce), as SIGHUP and
// `edged reload` do. Unlike a file event it also re-validates content that
// is quarantined and reports OutcomeUnchanged when nothing changed.
func (r *Reloader) Trigger() {
	select {
	case r.trig <- struct{}{}:
	default:
	}
}

// Close stops watching: it cancels a staging in progress (the serving
// engines are untouched), closes the watcher after draining it and waits
// for the Reloader's goroutines. It is idempotent. The targets' Hots stay
// open; close them after the Reloader.
func (r *Reloader) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.startOnce.Do(func() {}) // a later Start does nothing
		if r.workerDone != nil {
			<-r.workerDone
		}
		r.txMu.Lock()
		w := r.w
		r.txMu.Unlock()
		if w != nil {
			w.Close() // closes Events and Errors; drain then returns
		}
		r.drainWG.Wait()
	})
	return nil
}

// Stats returns the counters.
func (r *Reloader) Stats() Stats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	s := r.stats
	s.RejectedBy = maps.Clone(r.stats.RejectedBy)
	return s
}

func (r *Reloader) count(f func(*Stats)) {
	r.statsMu.Lock()
	f(&r.stats)
	r.statsMu.Unlock()
}

func (r *Reloader) emit(ev Event) {
	ev.Model, ev.Path = r.model, r.opts.Path
	if r.onEvent != nil {
		r.onEvent(ev)
	}
}

// run is the worker: it waits for a reason to check, debounces and checks.
func (r *Reloader) run() {
	defer close(r.workerDone)
	r.txMu.Lock()
	kind := kindRescan // after Load: the stat shows changes made before the watch existed
	if r.last.fi == nil {
		kind = kindEvent
	}
	r.txMu.Unlock()
	tick := time.NewTimer(r.interval[0])
	defer tick.Stop()
	pending := true
	for {
		if !pending {
			select {
			case <-r.ctx.Done():
				return
			case <-r.kick:
				kind = max(kind, kindEvent)
			case <-r.trig:
				kind = kindManual
			case <-tick.C:
				kind = max(kind, kindRescan)
			}
		}
		if !r.debounce(&kind) {
			return
		}
		if r.full.Swap(false) {
			kind = max(kind, kindEvent)
		}
		pending = r.check(r.ctx, kind)
		if !pending {
			kind = kindNone
		}
		r.txMu.Lock()
		polling := r.polling
		r.txMu.Unlock()
		if polling {
			tick.Reset(r.interval[1])
		} else {
			tick.Reset(r.interval[0])
		}
	}
}

// debounce waits until nothing happened for Debounce.
func (r *Reloader) debounce(kind *checkKind) bool {
	t := time.NewTimer(r.opts.Debounce)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return false
		case <-r.kick:
			*kind = max(*kind, kindEvent)
		case <-r.trig:
			*kind = kindManual
		case <-t.C:
			return true
		}
		t.Reset(r.opts.Debounce)
	}
}

// check looks at the file once and, when its content is new, runs the
// transaction for every target. It returns true when the file was still
// changing and should be checked again after another debounce.
func (r *Reloader) check(ctx context.Context, kind checkKind) (again bool) {
	r.txMu.Lock()
	defer r.txMu.Unlock()
	start := time.Now()
	if r.checkHook != nil {
		defer r.checkHook(start)
	}
	again, n := r.checkOnce(ctx, kind, start)
	giveBack(n) // the bytes read are not referenced any more
	return again
}

// checkOnce is check; n is the number of bytes it read.
func (r *Reloader) checkOnce(ctx context.Context, kind checkKind, start time.Time) (again bool, n int) {
	r.ensureWatch()
	r.count(func(s *Stats) { s.Checks++ })
	key, err := statFile(r.path)
	r.updateLink()
	if err != nil {
		r.statFailed(err, start)
		return false, 0
	}
	if kind == kindRescan && !r.retry && !r.missingNow && r.unreadable == "" && key.same(r.last) {
		return false, 0
	}
	seq := r.kickSeq.Load()
	if !backoff.Sleep(ctx, r.opts.Settle) {
		return false, 0
	}
	if r.kickSeq.Load() != seq {
		r.count(func(s *Stats) { s.Unstable++ })
		return true, 0
	}
	data, key, err := r.readModel(key)
	n = len(data)
	if errors.Is(err, errUnstable) {
		r.count(func(s *Stats) { s.Unstable++ })
		return true, n
	}
	if err != nil && !preRejected(err) {
		r.statFailed(err, start)
		return false, n
	}
	prev := r.last
	r.last, r.unreadable, r.retry = key, "", false
	wasMissing := r.missingNow
	r.missingNow = false
	var rejs []rejection
	if err != nil {
		rejs = r.unreadRejections(key, data, err, kind, wasMissing)
	} else {
		sha := sha256.Sum256(data)
		rejs = r.transact(ctx, data, sha, kind, wasMissing, start)
		if ctx.Err() != nil {
			return false, n
		}
	}
	if len(rejs) == 0 {
		return false, n
	}
	h := holdResult{}
	if slices.ContainsFunc(rejs, func(j rejection) bool { return holdable(j.err) }) {
		data = nil
		giveBack(n) // not while the rejection is held
		n = 0
		if until, ok := r.holdUntil(prev, key); ok {
			// Said at once: the outcome comes only when the hold ends.
			for _, j := range rejs {
				r.emitPending(j, until, start)
			}
		}
		h = r.hold(ctx, prev, key)
		if ctx.Err() != nil {
			return false, n // closing
		}
	}
	if h.changed {
		// An in-place writer was still writing: what was read is not
		// rejected (nor quarantined); the new content is checked after
		// the debounce.
		r.count(func(s *Stats) { s.Incomplete++ })
		for _, j := range rejs {
			r.emitFor(j.t, OutcomeIncomplete, j.sha, h.final(j.err), start)
		}
		return true, n
	}
	for _, j := range rejs {
		r.reject(j, key, h.final(j.err), start)
	}
	return false, n
}

// rejection is a target's refusal of the content read, not yet reported.
type rejection struct {
	t   *target
	sha [32]byte // zero when the file was not read whole
	err error
}

// holdable reports whether a rejection may be of a file still being
// written: a refusal of the content, not of the memory or the backend.
func holdable(err error) bool { return preRejected(err) && !transient(err) }

// unreadRejections turns a rejection before the file was read whole (err
// from readModel; data is the whole file when it fitted in the bytes
// sniffed, else nil) into one per target, leaving out targets for which
// the content is quarantined.
func (r *Reloader) unreadRejections(key fileKey, data []byte, err error, kind checkKind, wasMissing bool) []rejection {
	var sha [32]byte
	if data != nil {
		sha = sha256.Sum256(data)
	}
	var rejs []rejection
	for _, t := range r.targets {
		switch {
		case transient(err):
		case wasMissing:
			// A file that came back is judged again.
		case data == nil && key.same(r.preBad):
			r.count(func(s *Stats) { s.Quarantined++ })
			if kind == kindManual {
				r.emitFor(t, OutcomeUnchanged, sha, r.preJudged.again(), time.Now())
			}
			continue
		case data != nil && t.quarantined && t.bad == sha:
			r.count(func(s *Stats) { s.Quarantined++ })
			if kind == kindManual {
				r.emitFor(t, OutcomeUnchanged, sha, t.judged.again(), time.Now())
			}
			continue
		}
		rejs = append(rejs, rejection{t: t, sha: sha, err: err})
	}
	return rejs
}

// reject makes a rejection final: the content is quarantined until the
// file changes (by hash, or by stat when it was not read whole), except
// memory and backend refusals, which are retried at the next rescan.
// reason is what the event says: the rejection, with a hint when the file
// had been written in place.
func (r *Reloader) reject(j rejection, key fileKey, reason error, start time.Time) {
	switch {
	case transient(j.err):
		r.retry = true
	case j.sha == ([32]byte{}):
		r.preBad, r.preJudged = key, judgement{time.Now(), reason}
	default:
		j.t.bad, j.t.quarantined, j.t.judged = j.sha, true, judgement{time.Now(), reason}
	}
	label := trt.RejectReason(j.err)
	r.count(func(s *Stats) {
		s.Rejected++
		s.RejectedBy[label]++
	})
	r.emitFor(j.t, OutcomeRejected, j.sha, reason, start)
}

// holdResult is what hold saw.
type holdResult struct {
	held    time.Duration // how long the rejection was held; 0: not held
	age     time.Duration // from the file's modification to the read
	changed bool          // the file changed while the rejection was held
	grew    bool          // ... and is larger now
	from    int64         // size read
	to      int64         // size when the change was seen
	path    string
}

// hold waits before a rejection of the version key (read after prev) is
// made final, when that version may be a file still being written in
// place: the same inode as prev (or no prev: a file created in place, or
// the first read) modified less than Grace ago. It polls the file every
// Settle until Grace has passed since the modification, and returns as
// soon as the file changes. A file replaced by rename is complete by
// construction and is not held.
func (r *Reloader) hold(ctx context.Context, prev, key fileKey) (h holdResult) {
	h = holdResult{from: key.size, path: r.opts.Path}
	until, ok := r.holdUntil(prev, key)
	if !ok {
		return h
	}
	h.age = max(time.Since(key.mtime), 0) // a file dated in the future counts as just written
	wait := time.Until(until)
	begin := time.Now()
	defer func() { h.held = max(time.Since(begin), 1) }()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(r.opts.Settle)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return h
		case <-deadline.C:
			return h
		case <-tick.C:
		}
		now, err := statFile(r.path)
		if err != nil || !now.same(key) {
			h.changed, h.grew, h.to = true, err == nil && now.size > key.size, now.size
			return h
		}
	}
}

// holdUntil says whether a refusal of the version key (read after prev)
// is held (hold), and until when: the file was written in place (the
// same inode as prev, or no prev) less than Grace ago.
func (r *Reloader) holdUntil(prev, key fileKey) (time.Time, bool) {
	if r.opts.Grace <= 0 || key.fi == nil || prev.fi != nil && !os.SameFile(prev.fi, key.fi) {
		return time.Time{}, false
	}
	mtime := key.mtime
	if now := time.Now(); mtime.After(now) {
		mtime = now // a file dated in the future counts as just written
	}
	until := mtime.Add(r.opts.Grace)
	return until, time.Until(until) > 0
}

// emitPending says that the refusal j is held until until.
func (r *Reloader) emitPending(j rejection, until time.Time, start time.Time) {
	ev := Event{Target: j.t.Name, Outcome: OutcomePending, SHA256: j.sha, Until: until, Duration: time.Since(start), Reason: j.err}
	if cur := j.t.Hot.Current(); cur != nil {
		ev.Generation, ev.Serving = cur.Number, cur.SHA256
	}
	r.emit(ev)
}

// final is the reason to report for a rejection err after the hold h.
func (h holdResult) final(err error) error {
	switch {
	case h.grew:
		return fmt.Errorf("%w (incomplete? %s grew from %d to %d bytes after it was read: an in-place writer was still writing it; its new content is checked)", err, h.path, h.from, h.to)
	case h.changed:
		return fmt.Errorf("%w (%s changed again after it was read, while being written in place; its new content is checked)", err, h.path)
	case h.held > 0:
		return fmt.Errorf("%w (incomplete? %s was modified in place %s before it was read and has not changed in the %s since; if a writer is still writing it, it is checked again when it changes; write model files under a temporary name and rename them into place)",
			err, h.path, h.age.Round(time.Millisecond), h.held.Round(time.Millisecond))
	}
	return err
}

// statFailed reports a missing or unreadable file once per change of state.
func (r *Reloader) statFailed(err error, start time.Time) {
	r.last = fileKey{}
	if missing(err) {
		if r.missingNow {
			return
		}
		r.missingNow = true
		r.count(func(s *Stats) { s.Missing++ })
		reason := fmt.Errorf("trt: model %s: %s is missing (%w); the loaded engine keeps serving and the file is loaded again when it reappears", r.model, r.opts.Path, err)
		for _, t := range r.targets {
			r.emitFor(t, OutcomeMissing, [32]byte{}, reason, start)
		}
		return
	}
	if msg := err.Error(); msg != r.unreadable {
		r.unreadable = msg
		reason := fmt.Errorf("trt: model %s: cannot read %s: %w; the loaded engine keeps serving, fix the file and it is checked again", r.model, r.opts.Path, err)
		for _, t := range r.targets {
			r.emitFor(t, OutcomeUnreadable, [32]byte{}, reason, start)
		}
	}
}

func (r *Reloader) emitFor(t *target, o Outcome, sha [32]byte, reason error, start time.Time) {
	ev := Event{Target: t.Name, Outcome: o, SHA256: sha, Reason: reason, Duration: time.Since(start)}
	if cur := t.Hot.Current(); cur != nil {
		ev.Generation, ev.Serving = cur.Number, cur.SHA256
		if sha == ([32]byte{}) && o != OutcomeRejected && o != OutcomeIncomplete { // a refused file that was not read has no hash
			ev.SHA256 = cur.SHA256
		}
	}
	r.emit(ev)
}

// transact brings the targets to the content data (hash sha): those
// already serving it or for which it is quarantined are left as they
// are, the others get it together (apply), as one generation. It returns
// their rejections of the content, for the caller to hold or report
// (reject): every target that needed it, when one of them refused it.
// None when the content was installed or the Reloader is closing.
func (r *Reloader) transact(ctx context.Context, data []byte, sha [32]byte, kind checkKind, wasMissing bool, start time.Time) []rejection {
	var need []*target
	for _, t := range r.targets {
		if cur := t.Hot.Current(); cur != nil && cur.SHA256 == sha {
			t.quarantined = false
			r.count(func(s *Stats) { s.Unchanged++ })
			if kind == kindManual || wasMissing {
				r.emitFor(t, OutcomeUnchanged, sha, nil, start)
			}
			continue
		}
		if t.quarantined && t.bad == sha && !wasMissing {
			r.count(func(s *Stats) { s.Quarantined++ })
			if kind == kindManual {
				r.emitFor(t, OutcomeUnchanged, sha, t.judged.again(), start)
			}
			continue
		}
		t.quarantined = false
		need = append(need, t)
	}
	if len(need) == 0 {
		return nil
	}
	if _, err := r.apply(ctx, need, data, sha); err != nil {
		if ctx.Err() != nil {
			return nil // closing: cancellation is not a rejection
		}
		rejs := make([]rejection, len(need))
		for i, t := range need {
			rejs[i] = rejection{t: t, sha: sha, err: err}
		}
		return rejs
	}
	for _, t := range need {
		r.count(func(s *Stats) { s.Reloaded++ })
		r.emitFor(t, OutcomeReloaded, sha, nil, start)
	}
	return nil
}

// updateLink records whether the model path is a symlink and where it
// leads, for the event filter.
func (r *Reloader) updateLink() {
	fi, err := os.Lstat(r.path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		r.linked.Store(false)
		r.resolved.Store(nil)
		return
	}
	r.linked.Store(true)
	if res, err := filepath.EvalSymlinks(r.path); err == nil {
		if abs, err := filepath.Abs(res); err == nil {
			r.resolved.Store(&abs)
		}
	}
}

// ensureWatch creates the watcher and watches the folder, switching
// between watching and polling and reporting each switch. Called with txMu
// held, by the worker only.
func (r *Reloader) ensureWatch() {
	var err error
	if r.w == nil {
		w, e := r.newWatcher()
		if e != nil {
			err = watchHint("cannot create a file watcher", e)
		} else {
			r.w = w
			r.drainWG.Add(1)
			go r.drain(w)
		}
	}
	if r.w != nil {
		r.watchParent()
		if r.watching && moved(r.watchedDir, r.dir) {
			r.dirLost.Store(true)
		}
		if r.dirLost.Swap(false) && r.watching {
			// The folder was renamed, removed or replaced (a folder or a
			// symlink renamed over its name): the watch follows the old
			// folder, if it still exists. Drop it; the name is watched
			// again below, wherever it leads now. Remove fails when
			// fsnotify already dropped the watch (the folder moved or was
			// deleted); there is nothing to undo then.
			r.w.Remove(r.dir)
			r.watching = false
		}
		if !r.watching {
			fi, _ := os.Stat(r.dir) // before Add: a swap in between shows at the next check
			if e := r.w.Add(r.dir); e != nil {
				// A folder that is missing while the folder above is
				// watched is not a reason to poll: its return (the
				// second rename of a folder swap) is an event there.
				if !missing(e) || !r.pwatching {
					err = watchHint("cannot watch folder "+r.dir, e)
				}
			} else {
				r.watching, r.watchedDir = true, fi
			}
		}
		if r.watching {
			r.watchResolved()
		}
	}
	polling := err != nil
	if polling == r.polling {
		return
	}
	r.polling = polling
	r.count(func(s *Stats) { s.Polling = polling })
	if polling {
		r.emit(Event{Outcome: OutcomePolling, Reason: fmt.Errorf("trt: model %s: %w; checking %s every %s instead", r.model, err, r.opts.Path, r.interval[1])})
	} else {
		r.emit(Event{Outcome: OutcomeWatching})
	}
}

// watchParent watches the folder above the model's folder, best effort:
// a rename of the model's folder, or of a symlink to it, over its name (an
// OTA folder swap, an A/B symlink flip) is an event there and nowhere
// else. Without it such a swap is found by the rescan only. Called with
// txMu held.
func (r *Reloader) watchParent() {
	if r.pdir == r.dir {
		return // the model's folder is /
	}
	if r.pwatching && moved(r.watchedP, r.pdir) {
		r.pdirLost.Store(true)
	}
	if r.pdirLost.Swap(false) && r.pwatching {
		r.w.Remove(r.pdir) // fails when fsnotify already dropped it
		r.pwatching = false
	}
	if !r.pwatching {
		fi, _ := os.Stat(r.pdir) // before Add: a swap in between shows at the next check
		if r.w.Add(r.pdir) == nil {
			r.pwatching, r.watchedP = true, fi
		}
	}
}

// moved reports whether path no longer leads to the folder fi described:
// it was replaced higher up than the folders watched (no event says so;
// the rescan finds it), so the watches follow the old folders.
func moved(fi os.FileInfo, path string) bool {
	if fi == nil {
		return false
	}
	now, err := os.Stat(path)
	return err != nil || !os.SameFile(fi, now)
}

// watchResolved also watches the folder the symlinked model file lives in,
// when that is not the model path's folder, so in-place changes there are
// seen too. A folder that is already watched under another name (the
// target of a symlinked model folder, the folder above) is left alone:
// inotify gives the same watch for it, and removing it under one name
// would remove it under the other.
func (r *Reloader) watchResolved() {
	want := ""
	if p := r.resolved.Load(); p != nil && filepath.Dir(*p) != r.dir && filepath.Dir(*p) != r.pdir {
		want = filepath.Dir(*p)
		if sameDir(want, r.dir) || r.pwatching && sameDir(want, r.pdir) {
			want = ""
		}
	}
	if want == r.extraDir {
		return
	}
	if r.extraDir != "" {
		r.w.Remove(r.extraDir) // fails when the folder is gone; nothing to undo then
		r.extraDir = ""
	}
	if want != "" && r.w.Add(want) == nil {
		r.extraDir = want
	}
}

// sameDir reports whether paths a and b lead to the same folder.
func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
