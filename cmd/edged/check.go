package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/edged-dev/edged/internal/regfile"
	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/trt/tensorrt"
	"github.com/edged-dev/edged/umem"
)

// cmdCheck checks what run would, and reports every problem it finds in
// one run: the configuration (file:line:column and key) and its model
// files, the GPU, where each pipeline preprocesses, the devices the
// sources and sinks name, the memory the frame pools and engines need, and
// every model, loaded for each pipeline the way the daemon loads it
// (warm-up included) and checked against the pipeline with the function
// the daemon binds it with (runtime.CheckPipeline). The memory and the
// models are checked only when the configuration itself is valid: they
// depend on its values.
//
// A problem is of one of two kinds. A configuration problem needs a person
// to change something (the file, a model file, frame pools and engines
// that can never fit in this machine); waiting does not help. A problem of
// the machine may pass by itself: a required device missing or unusable,
// memory in use now, no GPU for device = "gpu". The exit status is 78 when
// at least one problem is a configuration problem, else 1 when there is a
// problem, else 0 (runnable).
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	path := fs.String("config", "", "configuration file (default: $EDGED_CONFIG, else the embedded default)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, what, perr := parseConfig(*path)
	if cfg == nil { // not readable as TOML: nothing else can be checked
		fmt.Fprintf(stderr, "edged check: %s:\n%v\n", what, perr)
		return exitCode(perr)
	}
	code := exitOK
	fail := func(c int, format string, a ...any) {
		fmt.Fprintf(stdout, "  FAIL  "+format+"\n", a...)
		if c == exitConfig || code == exitOK {
			code = c
		}
	}
	ok := func(format string, a ...any) { fmt.Fprintf(stdout, "  ok    "+format+"\n", a...) }
	warn := func(format string, a ...any) { fmt.Fprintf(stdout, "  warn  "+format+"\n", a...) }
	skip := func(why string) { fmt.Fprintf(stdout, "        not checked: %s\n", why) }

	ferr := cfg.CheckFiles()
	counts := fmt.Sprintf("%d source(s), %d model(s), %d pipeline(s), %d sink(s)", len(cfg.Sources), len(cfg.Models), len(cfg.Pipelines), len(cfg.Sinks))
	if err := errors.Join(perr, ferr); err != nil {
		fmt.Fprintf(stderr, "edged check: %s:\n%v\n", what, err)
		code = exitConfig
		fmt.Fprintf(stdout, "configuration %s: not valid, the problems are listed on stderr (%s)\n", what, counts)
	} else {
		fmt.Fprintf(stdout, "configuration %s: ok (%s)\n", what, counts)
	}
	valid := perr == nil
	const invalid = "the configuration has problems (listed on stderr)"
	missing := map[string]bool{} // models whose file CheckFiles refused
	var ce *config.Error
	if errors.As(ferr, &ce) {
		for _, p := range ce.Problems {
			var i int
			if _, err := fmt.Sscanf(p.Key, "model[%d].path", &i); err == nil && i < len(cfg.Models) {
				missing[cfg.Models[i].Name] = true
			}
		}
	}

	fmt.Fprintln(stdout, "gpu:")
	w := &wiring{log: slog.New(slog.DiscardHandler)}
	var alloc umem.Allocator = umem.NewHost()
	if a, _, err := w.allocator(cfg.GPU); err != nil {
		fail(exitFailure, "memory = %q: %v", cfg.GPU.Memory, err)
	} else {
		alloc = a
		for _, line := range splitLines(w.place.Probe.String()) {
			fmt.Fprintf(stdout, "        %s\n", line)
		}
		ok("memory strategy %s: %s", w.place.Strategy, w.place.Reason)
	}
	if lib, err := tensorrt.Probe(cfg.GPU.TensorRTLibrary); err == nil {
		ok("TensorRT: %s; this edged was built against TensorRT headers %s", lib, tensorrt.HeaderVersion())
		checkDLA(cfg, ok, fail)
	} else {
		fmt.Fprintf(stdout, "        TensorRT: %v\n", err)
	}

	checkBoard(stdout, cfg, ok, warn)

	fmt.Fprintln(stdout, "preprocessing:")
	for i := range cfg.Pipelines {
		checkPreprocess(w, cfg, &cfg.Pipelines[i], ok, warn, fail)
	}

	fmt.Fprintln(stdout, "devices:")
	for _, s := range cfg.Sources {
		if valid && fedByCamera(cfg, s.Name) {
			// What run builds each camera a pipeline uses with (it opens
			// nothing; a replay reads its recording's header or its
			// folder's images): an error is the configuration's, as run's.
			src, err := newCamera(&s, cfg, jpeg.Options{})
			if err != nil {
				fail(exitConfig, "source %s: %v", s.Name, err)
				continue
			}
			src.Close()
		}
		if s.Device == "" {
			ok("source %s (%s)", s.Name, s.Kind)
			continue
		}
		if err := checkDevice(s.Device); err != nil {
			if s.Optional {
				warn("source %s: %v (optional: edged waits for it)", s.Name, err)
			} else {
				fail(exitFailure, "source %s: %v", s.Name, err)
			}
			continue
		}
		ok("source %s: %s", s.Name, s.Device)
	}
	for _, s := range cfg.Sinks {
		switch s.Kind {
		case "serial":
			if err := checkDevice(s.Device); err != nil {
				warn("sink %s: %v (edged reopens it when it appears)", s.Name, err)
			} else {
				ok("sink %s: %s", s.Name, s.Device)
			}
		case "socket":
			checkSocket(&s, cfg.Resolve(s.Path), ok, warn, fail)
		}
	}

	fmt.Fprintln(stdout, "network:")
	checkNetwork(ctx, stdout, cfg, ok, warn, fail)

	fmt.Fprintln(stdout, "memory:")
	fits := false
	if valid {
		fits = checkMemory(stdout, w, cfg, ok, fail)
	} else {
		skip(invalid)
	}

	fmt.Fprintln(stdout, "models:")
	sigs := map[string]trt.Signature{}
	if !valid {
		skip(invalid)
	}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		if !valid {
			break
		}
		if missing[m.Name] {
			fmt.Fprintf(stdout, "        model %s: not loaded: its file is not there (listed on stderr)\n", m.Name)
			continue
		}
		if !fits {
			// Loading it would allocate what the memory check refused.
			fmt.Fprintf(stdout, "        model %s: not loaded: the memory check above refused the configuration\n", m.Name)
			continue
		}
		// Each pipeline gets its own engine, loaded with its options, as
		// run loads them; a model no pipeline uses is loaded once.
		var users []*config.Pipeline
		for j := range cfg.Pipelines {
			if cfg.Pipelines[j].Model == m.Name {
				users = append(users, &cfg.Pipelines[j])
			}
		}
		if len(users) == 0 {
			users = append(users, nil)
		}
		for _, pc := range users {
			start := time.Now()
			sig, md, backend, plugins, err := checkModel(ctx, w, cfg, m, pc, alloc)
			if err != nil {
				c := exitConfig
				if errors.Is(err, trt.ErrMemory) {
					c = exitFailure // memory in use now
				}
				fail(c, "model %s (%s): %v", m.Name, cfg.Resolve(m.Path), err)
				break
			}
			_, seen := sigs[m.Name]
			sigs[m.Name] = sig
			ok("model %s (%s): %s, loaded and warmed up in %s; %s", m.Name, cfg.Resolve(m.Path), backend, time.Since(start).Round(time.Millisecond), sig)
			if !seen {
				fmt.Fprintf(stdout, "        model %s: %s\n", m.Name, md)
				if plugins != "" {
					fmt.Fprintf(stdout, "        model %s: TensorRT plugins: %s\n", m.Name, plugins)
				}
			}
			if pc == nil {
				continue
			}
			// The same decision run makes when it binds the pipeline.
			notes, err := edruntime.CheckPipeline(cfg, pc, sig, md)
			for _, n := range notes {
				fmt.Fprintf(stdout, "        pipeline %s: %s\n", pc.Name, n)
			}
			if err != nil {
				for _, line := range splitLines(err.Error()) {
					fail(exitConfig, "%s", line)
				}
				continue
			}
			ok("pipeline %s: its preprocessing and post-processing fit model %s", pc.Name, m.Name)
		}
	}
	checkMJPEG(w, cfg, sigs, ok, warn)
	switch code {
	case exitOK:
		fmt.Fprintln(stdout, "runnable")
	case exitConfig:
		fmt.Fprintln(stdout, "not runnable: the configuration or a model file must change (exit 78)")
	default:
		fmt.Fprintln(stdout, "not runnable on this machine now: a device, the GPU or memory is missing (exit 1)")
	}
	return code
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
	for _, n := range plan.Needs {
		where := "system memory"
		if n.OnDevice {
			where = "GPU memory"
		}
		fmt.Fprintf(stdout, "        pipeline %s: frame pool %d × %s = %s; engine about %s (%s); engine tensors %s; preprocessing %s; decoding %s\n", n.Pipeline, n.Slots,
			edruntime.FormatSize(n.SlotBytes), edruntime.FormatSize(n.PoolBytes()), edruntime.FormatSize(n.EngineBytes), where,
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
// warm-up included) and returns the engine's signature, what its file
// says about itself, the backend and, for TensorRT, the plugin libraries
// loaded.
func checkModel(ctx context.Context, w *wiring, cfg *config.Config, m *config.Model, pc *config.Pipeline, alloc umem.Allocator) (sig trt.Signature, md *trt.Metadata, backend, plugins string, err error) {
	name, err := config.ModelBackend(m)
	if err != nil {
		return trt.Signature{}, nil, "", "", err
	}
	if _, builtin := m.Builtin(); name == "tensorrt" && !builtin {
		// The engine header says which TensorRT built it; check it against
		// this machine's library before anything else, so a mismatch is
		// named even where this edged cannot load engines.
		data, err := readModel(cfg.Resolve(m.Path), cfg.Daemon.MaxModelBytes)
		if err != nil {
			return trt.Signature{}, nil, "", "", err
		}
		lib, perr := tensorrt.Probe(cfg.GPU.TensorRTLibrary)
		if perr == nil {
			if _, err := plan.Check(data, plan.Options{Library: lib.Version, VersionCompatible: m.VersionCompatible}); err != nil {
				return trt.Signature{}, nil, "", "", err
			}
		} else if _, err := plan.Parse(data); err != nil {
			return trt.Signature{}, nil, "", "", err
		}
	}
	be, err := w.backend(name, m, cfg)
	if err != nil {
		return trt.Signature{}, nil, "", "", err
	}
	if c, ok := be.(io.Closer); ok {
		defer c.Close()
	}
	hot, err := edruntime.LoadEngine(ctx, cfg, m, pc, be, alloc)
	if err != nil {
		return trt.Signature{}, nil, "", "", err
	}
	defer hot.Close()
	e := hot.Current().Engine
	if p, ok := be.(interface{ Plugins() string }); ok {
		plugins = p.Plugins()
	}
	return trt.SignatureOf(e), trt.MetadataOf(e), be.Name(), plugins, nil
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
	g, err := w.gpuPreprocess(preprocess.Options{Out: preprocess.Output{C: 3, H: 8, W: 8}}, cfg)
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
	if dev == "auto" {
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
		if pc.Source == name {
			return true
		}
	}
	return false
}
