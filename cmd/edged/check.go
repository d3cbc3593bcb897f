package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/edged-dev/edged/internal/regfile"
	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/tensorrt"
	"github.com/edged-dev/edged/umem"
)

// cmdCheck checks what run would, and reports every problem it finds in
// one run, on stdout, in order: the configuration (file:line:column and
// key) and its model files, the GPU, where each pipeline preprocesses, the
// sources and sinks (each opened, made or connected to as run would, as
// this user, and closed again: cameras and UARTs opened, the socket made
// in its folder and removed, the MQTT broker connected to with the
// configured credentials and TLS), the state folder, the memory the frame
// pools and engines need, and every model, loaded for each pipeline the
// way the daemon loads it (warm-up included) and checked against the
// pipeline with the function the daemon binds it with
// (runtime.CheckPipeline). Every path and default is resolved by the
// functions run uses (wire.go). The memory and the models are checked
// only when the configuration itself is valid: they depend on its values.
//
// A problem is of one of two kinds. A configuration problem needs a person
// to change something (the file, a model file, credentials the broker
// refuses, frame pools and engines that can never fit in this machine);
// waiting does not help. A problem of the machine may pass by itself: a
// required device missing or unusable, a socket path in use, memory in use
// now, no GPU for device = "gpu". The exit status is 78 when at least one
// problem is a configuration problem, else 1 when there is a problem, else
// 0 (runnable). A warning (an optional device missing, a broker that does
// not answer now) is not a problem: run starts and waits for it.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	path := fs.String("config", "", "configuration file (default: $EDGED_CONFIG, else the embedded default)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	r := &report{w: stdout}
	cfg, what, perr := parseConfig(*path)
	if cfg == nil { // not readable as TOML: nothing else can be checked
		r.section("configuration %s: not readable", what)
		r.problems(perr)
		r.verdict()
		return r.code
	}
	valid, missing := r.configuration(cfg, what, perr)
	const invalid = "the configuration has problems (listed above)"

	w := &wiring{log: slog.New(slog.DiscardHandler)}
	alloc := r.gpu(w, cfg)
	checkBoard(stdout, cfg, r.ok, r.warn)

	r.section("preprocessing:")
	for i := range cfg.Pipelines {
		checkPreprocess(w, cfg, &cfg.Pipelines[i], r.ok, r.warn, r.fail)
	}
	r.section("sources:")
	checkSources(ctx, r, cfg, valid)
	r.section("sinks:")
	checkSinks(ctx, r, cfg)
	r.section("state:")
	checkState(r, cfg)
	r.section("network:")
	checkNetwork(ctx, stdout, cfg, r.ok, r.warn, r.fail)

	r.section("memory:")
	fits := false
	if valid {
		fits = checkMemory(stdout, w, cfg, r.ok, r.fail)
	} else {
		r.skip(invalid)
	}
	r.section("models:")
	if !valid {
		r.skip(invalid)
	}
	sigs := map[string]trt.Signature{}
	for i := range cfg.Models {
		if !valid {
			break
		}
		m := &cfg.Models[i]
		if missing[m.Name] {
			r.note("model %s: not loaded: its file is not there (listed above)", m.Name)
			continue
		}
		if !fits {
			// Loading it would allocate what the memory check refused.
			r.note("model %s: not loaded: the memory check above refused the configuration", m.Name)
			continue
		}
		checkModelFor(ctx, r, w, cfg, m, alloc, sigs)
	}
	if valid {
		checkSameFile(cfg, r.warn)
	}
	checkMJPEG(w, cfg, sigs, r.ok, r.warn)
	r.verdict()
	return r.code
}

// report is what check prints: sections, then one line per finding
// (ok, warn, FAIL, or an indented note), and the exit status so far.
type report struct {
	w    io.Writer
	code int
}

func (r *report) section(format string, a ...any) { fmt.Fprintf(r.w, format+"\n", a...) }
func (r *report) ok(format string, a ...any)      { fmt.Fprintf(r.w, "  ok    "+format+"\n", a...) }
func (r *report) warn(format string, a ...any)    { fmt.Fprintf(r.w, "  warn  "+format+"\n", a...) }
func (r *report) note(format string, a ...any)    { fmt.Fprintf(r.w, "        "+format+"\n", a...) }
func (r *report) skip(why string)                 { r.note("not checked: %s", why) }

// fail reports a problem; c is exitConfig or exitFailure (above).
func (r *report) fail(c int, format string, a ...any) {
	fmt.Fprintf(r.w, "  FAIL  "+format+"\n", a...)
	if c == exitConfig || r.code == exitOK {
		r.code = c
	}
}

// problems reports every problem of a configuration error, one a line.
func (r *report) problems(err error) {
	var ce *config.Error
	if !errors.As(err, &ce) {
		r.fail(exitCode(err), "%v", err)
		return
	}
	for _, p := range ce.Problems {
		r.fail(exitConfig, "%s", p)
	}
}

func (r *report) verdict() {
	switch r.code {
	case exitOK:
		fmt.Fprintln(r.w, "runnable")
	case exitConfig:
		fmt.Fprintln(r.w, "not runnable: the configuration, a model file or credentials must change (exit 78)")
	default:
		fmt.Fprintln(r.w, "not runnable on this machine now: a device, the GPU or memory is missing or in use (exit 1)")
	}
}

// configuration reports the configuration's problems and those of the
// files it names; valid is false when the configuration itself has
// problems, missing holds the models whose file is not there.
func (r *report) configuration(cfg *config.Config, what string, perr error) (valid bool, missing map[string]bool) {
	ferr := cfg.CheckFiles()
	counts := fmt.Sprintf("%d source(s), %d model(s), %d pipeline(s), %d sink(s)", len(cfg.Sources), len(cfg.Models), len(cfg.Pipelines), len(cfg.Sinks))
	if err := errors.Join(perr, ferr); err != nil {
		r.section("configuration %s: not valid (%s):", what, counts)
		if perr != nil {
			r.problems(perr)
		}
		if ferr != nil {
			r.problems(ferr)
		}
	} else {
		r.section("configuration %s: ok (%s)", what, counts)
	}
	missing = map[string]bool{}
	var ce *config.Error
	if errors.As(ferr, &ce) {
		for _, p := range ce.Problems {
			var i int
			if _, err := fmt.Sscanf(p.Key, "model[%d].path", &i); err == nil && i < len(cfg.Models) {
				missing[cfg.Models[i].Name] = true
			}
		}
	}
	return perr == nil, missing
}

// gpu reports the CUDA device and the memory strategy (the driver's
// absence once), and the TensorRT library: in full when a model needs
// it, in one line when none does.
func (r *report) gpu(w *wiring, cfg *config.Config) umem.Allocator {
	r.section("gpu:")
	var alloc umem.Allocator = umem.NewHost()
	if a, _, err := w.allocator(cfg.GPU); err != nil {
		r.fail(exitFailure, "memory = %q: %v", cfg.GPU.Memory, err)
	} else {
		alloc = a
		for _, line := range splitLines(w.place.Probe.String()) {
			r.note("%s", line)
		}
		// The reason repeats the driver's error the probe line gave.
		why := strings.Replace(w.place.Reason, " ("+w.place.Probe.NoCUDA+")", "", 1)
		r.ok("memory strategy %s: %s", w.place.Strategy, why)
		checkFrames(r, w, cfg)
	}
	needTRT := false
	for i := range cfg.Models {
		if b, err := config.ModelBackend(&cfg.Models[i]); err == nil && b == "tensorrt" {
			needTRT = true
		}
	}
	switch lib, err := tensorrt.Probe(cfg.GPU.TensorRTLibrary); {
	case err == nil:
		r.ok("TensorRT: %s; this edged was built against TensorRT headers %s", lib, tensorrt.HeaderVersion())
		checkDLA(cfg, r.ok, r.fail)
	case needTRT:
		r.note("TensorRT: %v", err)
	default:
		r.note("TensorRT: not found (no model of this configuration needs it)")
	}
	return alloc
}

// checkModelFor loads model m as run loads it: once (for its first
// pipeline, or for none when no pipeline names it), and an engine shared
// from that one for each other pipeline naming it; it checks each
// pipeline against its engine and says what the pipelines share.
func checkModelFor(ctx context.Context, r *report, w *wiring, cfg *config.Config, m *config.Model, alloc umem.Allocator, sigs map[string]trt.Signature) {
	var users []*config.Pipeline
	for j := range cfg.Pipelines {
		if cfg.Pipelines[j].Model == m.Name {
			users = append(users, &cfg.Pipelines[j])
		}
	}
	if len(users) == 0 {
		users = append(users, nil)
	}
	var base *loadedModel
	defer func() {
		if base != nil {
			base.close()
		}
	}()
	var batch trt.BatchDim
	for _, pc := range users {
		start := time.Now()
		hot, how := (*trt.Hot)(nil), "loaded and warmed up"
		var err error
		if base == nil {
			if base, err = checkModel(ctx, w, cfg, m, pc, alloc); err == nil {
				hot = base.hot
			}
		} else {
			how = "an engine shared from the one loaded for pipeline " + users[0].Name + ", warmed up"
			if hot, err = edruntime.ShareEngine(ctx, cfg, base.hot, m, pc, base.be, alloc); err == nil {
				defer hot.Close()
			}
		}
		if err != nil {
			c := exitConfig
			if errors.Is(err, trt.ErrMemory) {
				c = exitFailure // memory in use now
			}
			if berr := edruntime.BatchProblem(cfg, pc, err); berr != err {
				for _, line := range splitLines(berr.Error()) {
					r.fail(exitConfig, "%s", line)
				}
				return
			}
			r.fail(c, "model %s (%s): %v", m.Name, cfg.Resolve(m.Path), err)
			return
		}
		e := hot.Current().Engine
		sig, md := trt.SignatureOf(e), trt.MetadataOf(e)
		if b, ok := e.(interface{ BatchDim() trt.BatchDim }); ok && b.BatchDim() != (trt.BatchDim{}) {
			batch = b.BatchDim()
		}
		_, seen := sigs[m.Name]
		sigs[m.Name] = sig
		r.ok("model %s (%s): %s, %s in %s; %s", m.Name, cfg.Resolve(m.Path), base.be.Name(), how, time.Since(start).Round(time.Millisecond), sig)
		if !seen {
			r.note("model %s: %s", m.Name, md)
			if base.plugins != "" {
				r.note("model %s: TensorRT plugins: %s", m.Name, base.plugins)
			}
		}
		if pc == nil {
			continue
		}
		// The same decision run makes when it binds the pipeline.
		notes, err := edruntime.CheckPipeline(cfg, pc, sig, md)
		for _, n := range notes {
			r.note("pipeline %s: %s", pc.Name, n)
		}
		if err != nil {
			for _, line := range splitLines(err.Error()) {
				r.fail(exitConfig, "%s", line)
			}
			continue
		}
		r.ok("pipeline %s: its preprocessing and post-processing fit model %s", pc.Name, m.Name)
		if b, ok := e.(trt.Batched); ok && pc.Batched() {
			r.note("pipeline %s: %s", pc.Name, edruntime.BatchNote(cfg, pc, b.BatchDim()))
		}
	}
	r.note("model %s: %s", m.Name, modelSharing(cfg, m, users, batch))
}

// modelSharing says, for check, a model's batch dimension (fixed N,
// dynamic, or 1), the pipelines sharing it and the memory it takes once.
func modelSharing(cfg *config.Config, m *config.Model, users []*config.Pipeline, batch trt.BatchDim) string {
	if batch == (trt.BatchDim{}) {
		batch, _ = edruntime.DeclaredBatch(cfg, m)
	}
	var dim string
	switch {
	case batch == (trt.BatchDim{}):
		dim = "batch dimension not known before a pipeline batches (TensorRT reads it from the engine's optimization profile)"
	case batch.Fixed && batch.Max == 1:
		dim = "batch dimension 1"
	default:
		dim = "batch dimension " + batch.String()
	}
	var names []string
	for _, pc := range users {
		if pc != nil {
			names = append(names, pc.Name)
		}
	}
	var engine, tensors int64
	var file int64
	for _, n := range edruntime.PlanMemory(cfg, nil, false).Needs {
		if n.Model == m.Name {
			engine, tensors, file = engine+n.EngineBytes, tensors+n.TensorBytes, n.ModelBytes
		}
	}
	mem := fmt.Sprintf("engine about %s (file %s × %g) once", edruntime.FormatSize(engine), edruntime.FormatSize(file), reload.DefaultBudgetFactor)
	if tensors > 0 {
		mem += fmt.Sprintf(", engine tensors %s in all", edruntime.FormatSize(tensors))
	}
	if bn, _ := config.ModelBackend(m); bn == "onnx" {
		n, why := edruntime.ModelThreads(cfg, m)
		mem += fmt.Sprintf("; ONNX Runtime intra-op threads %d (%s)", n, why)
	}
	switch len(names) {
	case 0:
		return fmt.Sprintf("%s; no pipeline names it; %s", dim, mem)
	case 1:
		return fmt.Sprintf("%s; pipeline %s; %s", dim, names[0], mem)
	}
	return fmt.Sprintf("%s; shared by pipelines %s (loaded once, an engine each); %s", dim, strings.Join(names, ", "), mem)
}

// checkSameFile warns of [[model]] tables naming one file: each is a
// model of its own, loaded (and its weights held) once per table, where
// one table named by every pipeline would be loaded once for all.
func checkSameFile(cfg *config.Config, warn func(string, ...any)) {
	first := map[string]int{}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		if _, builtin := m.Builtin(); builtin {
			continue
		}
		p := cfg.Resolve(m.Path)
		if j, ok := first[p]; ok {
			warn("%s", cfg.Problem(fmt.Sprintf("model[%d].path", i), "models %q and %q name the same file %s: each loads it and holds its weights; name model %q in both pipelines to load it once for all of them",
				cfg.Models[j].Name, m.Name, p, cfg.Models[j].Name))
			continue
		}
		first[p] = i
	}
}

// loadedModel is a model check loaded: the first engine and the backend
// that loaded it, which the model's other pipelines share from.
type loadedModel struct {
	hot     *trt.Hot
	be      trt.Backend
	plugins string
}

func (l *loadedModel) close() {
	l.hot.Close()
	if c, ok := l.be.(io.Closer); ok {
		c.Close()
	}
}

// checkDLA says how many DLA cores TensorRT finds on this module, and
// refuses a model's dla_core that is not among them.
func checkDLA(cfg *config.Config, ok func(string, ...any), fail func(int, string, ...any)) {
	n, err := tensorrt.DLACores(cfg.GPU.TensorRTLibrary)
	if err != nil {
		ok("TensorRT DLA cores: not known (%v)", err)
		return
	}
	ok("TensorRT DLA cores: %d", n)
	for i := range cfg.Models {
		m := &cfg.Models[i]
		if core := m.DLA(); core >= n {
			fail(exitConfig, "%s", cfg.Problem(fmt.Sprintf("model[%d].dla_core", i), "model %q runs on DLA core %d, but this module has %d DLA cores%s",
				m.Name, core, n, map[bool]string{true: "", false: fmt.Sprintf(" (0 to %d)", n-1)}[n == 0]))
		}
	}
}

// checkMemory compares what the configuration's frame pools, engines and
// their tensors, preprocessing and decoding need with the memory there is,
// as run does before it allocates anything, and reports whether it fits.
func checkMemory(stdout io.Writer, w *wiring, cfg *config.Config, ok func(string, ...any), fail func(int, string, ...any)) bool {
	sizes := func(pc *config.Pipeline, sc *config.Source) (int, int64) {
		src, err := newCamera(sc, cfg, jpeg.Options{}) // opens nothing; replay reads the recording's header
		if err != nil {
			return edruntime.SlotSize(nil, sc), 0
		}
		defer src.Close()
		return edruntime.SourceSize(src, sc)
	}
	var b edruntime.MemoryBudget
	free, total, discrete := w.deviceMemory()
	if discrete {
		b.Device = func() (uint64, uint64, error) { return free, total, nil }
	}
	plan := edruntime.PlanMemory(cfg, sizes, discrete)
	markDevicePools(plan, w, cfg)
	for _, n := range plan.Needs {
		where := "system memory"
		if n.OnDevice {
			where = "GPU memory"
		}
		engine := fmt.Sprintf("engine about %s (%s)", edruntime.FormatSize(n.EngineBytes), where)
		if n.SharedWith != "" {
			engine = fmt.Sprintf("engine shared with pipeline %s (model %s counted once, there)", n.SharedWith, n.Model)
		}
		pool := ""
		if n.PoolOnDevice {
			pool = " (GPU memory)"
		}
		fmt.Fprintf(stdout, "        pipeline %s: frame pool %d × %s = %s%s; %s; engine tensors %s; preprocessing %s; decoding %s\n", n.Pipeline, n.Slots,
			edruntime.FormatSize(n.SlotBytes), edruntime.FormatSize(n.PoolBytes()), pool, engine,
			edruntime.FormatSize(n.TensorBytes), edruntime.FormatSize(n.PreBytes), edruntime.FormatSize(n.DecodeBytes))
	}
	r, err := edruntime.CheckMemory(cfg, plan, edruntime.MemoryPlan{}, b)
	if err != nil {
		code := exitFailure
		if errors.Is(err, config.ErrInvalid) {
			code = exitConfig
		}
		for _, line := range splitLines(err.Error()) {
			fail(code, "%s", line)
		}
		return false
	}
	ok("%s", r)
	return true
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

// checkDevice reports whether a device node exists and can be opened for
// reading and writing by this user.
func checkDevice(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR|0x800 /* O_NONBLOCK */, 0)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: %w", p, pe.Err)
		}
		return err
	}
	return f.Close()
}

// checkModel loads model m for pipeline pc (nil: for none) as the daemon
// loads it at start (runtime.LoadEngine: the model file through the
// reload transaction's checks, every engine through its staging step,
// warm-up included) and returns it with its backend and, for TensorRT,
// the plugin libraries loaded; the caller closes it.
func checkModel(ctx context.Context, w *wiring, cfg *config.Config, m *config.Model, pc *config.Pipeline, alloc umem.Allocator) (*loadedModel, error) {
	name, err := config.ModelBackend(m)
	if err != nil {
		return nil, err
	}
	if _, builtin := m.Builtin(); name == "tensorrt" && !builtin {
		// The engine header says which TensorRT built it; check it against
		// this machine's library before anything else, so a mismatch is
		// named even where this edged cannot load engines.
		data, err := readModel(cfg.Resolve(m.Path), cfg.Daemon.MaxModelBytes)
		if err != nil {
			return nil, err
		}
		lib, perr := tensorrt.Probe(cfg.GPU.TensorRTLibrary)
		if perr == nil {
			if _, err := plan.Check(data, plan.Options{Library: lib.Version, VersionCompatible: m.VersionCompatible}); err != nil {
				return nil, err
			}
		} else if _, err := plan.Parse(data); err != nil {
			return nil, err
		}
	}
	be, err := w.backend(name, m, cfg)
	if err != nil {
		return nil, err
	}
	hot, err := edruntime.LoadEngine(ctx, cfg, m, pc, be, alloc)
	if err != nil {
		if c, ok := be.(io.Closer); ok {
			c.Close()
		}
		return nil, err
	}
	l := &loadedModel{hot: hot, be: be}
	if p, ok := be.(interface{ Plugins() string }); ok {
		l.plugins = p.Plugins()
	}
	return l, nil
}

// checkPreprocess says where a pipeline will preprocess: with a CUDA
// device and device = "auto" or "gpu" it compiles (or loads from the
// cache) the GPU kernels; "auto" still measures both paths on the first
// frame when it runs.
func checkPreprocess(w *wiring, cfg *config.Config, pc *config.Pipeline, ok, warn func(string, ...any), fail func(int, string, ...any)) {
	dev := pc.Preprocess.Device
	if dev == "cpu" {
		ok("pipeline %s: CPU (preprocess.device = \"cpu\")", pc.Name)
		return
	}
	start := time.Now()
	var frames umem.Allocator // nil: the daemon's (frames.go); a batched pipeline's GPU path is built for its first camera
	if cams := pc.Cameras(); len(cams) > 0 {
		frames, _, _ = w.frameAllocator(pc, cfg.Source(cams[0]), cfg)
	}
	g, err := w.gpuPreprocess(preprocess.Options{Out: preprocess.Output{C: 3, H: 8, W: 8}}, frames, cfg)
	if err != nil && dev == "auto" && (w.place == nil || w.place.Device == nil) {
		ok("pipeline %s: CPU (no CUDA device; see gpu: above)", pc.Name)
		return
	}
	if err != nil {
		if dev == "gpu" {
			fail(exitFailure, "pipeline %s: preprocess.device = \"gpu\": %v", pc.Name, err)
		} else {
			ok("pipeline %s: CPU (%v)", pc.Name, err)
		}
		return
	}
	defer g.Close()
	src := "compiled"
	if gp, isGPU := g.(*preprocess.GPU); isGPU {
		if ptx := gp.PTX(); ptx.FromCache {
			src = "from the kernel cache"
		} else {
			src = "compiled by NVRTC " + ptx.NVRTC
		}
		if ptx := gp.PTX(); ptx.CacheErr != nil {
			warn("pipeline %s: kernel cache: %v", pc.Name, ptx.CacheErr)
		}
	}
	how := "GPU"
	switch {
	case frames != nil:
		how = "GPU, reading NVDEC's pictures in device memory in place"
	case dev == "auto":
		how = "GPU or CPU, whichever is faster on the first frame"
	}
	ok("pipeline %s: %s (kernels %s in %s)", pc.Name, how, src, time.Since(start).Round(time.Millisecond))
}

// readModel reads a model file that is at most maxBytes long
// (daemon.max_model_bytes); a larger one is refused before it is read. It
// is only for the TensorRT header check: engines are loaded by
// runtime.LoadEngine.
func readModel(path string, maxBytes int64) ([]byte, error) {
	f, st, err := regfile.Open(path, regfile.NoLimit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > maxBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than daemon.max_model_bytes = %d; it was not read", trt.ErrTooLarge, path, st.Size(), maxBytes)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%s: %w (did it change while being read?)", path, err)
	}
	return data, nil
}

// fedByCamera reports whether source name is a camera a pipeline takes
// frames from: run builds exactly those (Factories.Camera).
func fedByCamera(cfg *config.Config, name string) bool {
	for _, pc := range cfg.Pipelines {
		if slices.Contains(pc.Cameras(), name) {
			return true
		}
	}
	return false
}
