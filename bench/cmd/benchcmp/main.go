package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	inputs, out, edged, ortLib, python, loop string
	mode, only                               string
	threads, size, rounds                    int
	warmup, measure, startTimeout            time.Duration
	pace                                     float64
	edgedDevice                              string
	edgedPreThreads                          int
	cvThreads                                int
	set                                      map[string]bool // flags given on the command line
}

func main() {
	var o options
	flag.StringVar(&o.inputs, "inputs", "bin/bench-inputs", "benchgen's output folder (inputs.json, model.onnx, *.edgedraw)")
	flag.StringVar(&o.out, "out", "", "report folder (default bin/bench-report/<UTC time>)")
	flag.StringVar(&o.edged, "edged", "bin/edged", "the edged binary")
	flag.StringVar(&o.ortLib, "ort-lib", "", "libonnxruntime.so.1 for edged (default: edged's own search: next to the binary, ...)")
	flag.StringVar(&o.python, "python", "", "Python interpreter (default: the first of python3, /usr/bin/python3 with cv2 and numpy, and onnxruntime for e2e)")
	flag.StringVar(&o.loop, "loop", "bench/pyloop/loop.py", "the Python loop")
	flag.StringVar(&o.mode, "mode", "auto", "e2e (both sides end to end), pre (compare preprocessing; Python without onnxruntime), auto (e2e if the Python has onnxruntime)")
	flag.StringVar(&o.only, "only", "", "comma-separated input names to run (default all, e.g. noisy-1920x1080,flat-1920x1080)")
	flag.IntVar(&o.threads, "threads", 1, "ONNX Runtime intra-op threads on both sides (edged's model threads; 1 is edged's default)")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "results discarded after the first one, per run")
	flag.DurationVar(&o.measure, "measure", 6*time.Second, "measured window per run")
	flag.DurationVar(&o.startTimeout, "start-timeout", 60*time.Second, "how long a side may take to its first result")
	flag.IntVar(&o.rounds, "rounds", 1, "runs of each side per input, taken in turn; each statistic is the median over rounds (for machines whose load changes)")
	flag.Float64Var(&o.pace, "pace", 0.5, "the latency runs give both sides frames at this fraction of the lower saturated throughput; 0 = no paced runs, latencies from the saturation runs")
	flag.StringVar(&o.edgedDevice, "edged-device", "auto", "[pipeline.preprocess] device for edged (auto | gpu | cpu); written into the config only when given")
	flag.IntVar(&o.edgedPreThreads, "edged-pre-threads", 0, "[pipeline.preprocess] threads for edged; written into the config only when given")
	flag.IntVar(&o.cvThreads, "cv-threads", 0, "cv2.setNumThreads for the Python loop; OpenCV's default unless given")
	replot := flag.String("replot", "", "only rewrite report.md and plot.png of this report folder from its results.json")
	flag.Parse()
	if *replot != "" {
		if err := rewrite(*replot); err != nil {
			fmt.Fprintln(os.Stderr, "benchcmp:", err)
			os.Exit(1)
		}
		return
	}
	o.set = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if o.threads < 1 {
		fmt.Fprintln(os.Stderr, "benchcmp: -threads must be at least 1")
		os.Exit(2)
	}
	if o.out == "" {
		o.out = filepath.Join("bin", "bench-report", time.Now().UTC().Format("20060102T150405Z"))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, &o); err != nil {
		fmt.Fprintln(os.Stderr, "benchcmp:", err)
		os.Exit(1)
	}
}

// Manifest is benchgen's inputs.json.
type Manifest struct {
	Version     int     `json:"version"`
	Seed        uint64  `json:"seed"`
	Model       string  `json:"model"`
	ModelSHA256 string  `json:"model_sha256"`
	InputName   string  `json:"input_name"`
	OutputName  string  `json:"output_name"`
	InputSize   int     `json:"input_size"`
	Inputs      []Input `json:"inputs"`
}

// Input is one replay file of the manifest.
type Input struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
	Frames int    `json:"frames"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
}

func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "inputs.json"))
	if err != nil {
		return nil, fmt.Errorf("%w (generate the inputs with: bin/benchgen -o %s)", err, dir)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "inputs.json"), err)
	}
	if m.Version != 1 || len(m.Inputs) == 0 {
		return nil, fmt.Errorf("%s: version %d with %d inputs: regenerate with this benchgen", filepath.Join(dir, "inputs.json"), m.Version, len(m.Inputs))
	}
	return &m, nil
}

// findPython returns the interpreter to use and whether it has
// onnxruntime.
func findPython(o *options) (string, bool, error) {
	cands := []string{o.python}
	if o.python == "" {
		cands = []string{"python3", "/usr/bin/python3"}
	}
	var withCV []string
	for _, c := range cands {
		if exec.Command(c, "-c", "import cv2, numpy").Run() != nil {
			continue
		}
		if exec.Command(c, "-c", "import onnxruntime").Run() == nil {
			return c, true, nil
		}
		withCV = append(withCV, c)
	}
	if len(withCV) > 0 {
		return withCV[0], false, nil
	}
	return "", false, fmt.Errorf("no Python with cv2 and numpy among %s: on Debian, apt-get install python3-opencv python3-numpy (or pass -python)", strings.Join(cands, ", "))
}

func run(ctx context.Context, o *options) error {
	m, err := readManifest(o.inputs)
	if err != nil {
		return err
	}
	py, hasORT, err := findPython(o)
	if err != nil {
		return err
	}
	switch o.mode {
	case "auto":
		o.mode = "pre"
		if hasORT {
			o.mode = "e2e"
		}
	case "e2e":
		if !hasORT {
			return fmt.Errorf("-mode e2e: %s cannot import onnxruntime (pip install onnxruntime, or use -mode pre)", py)
		}
	case "pre":
	default:
		return fmt.Errorf("-mode %q: want e2e, pre or auto", o.mode)
	}
	if o.pace < 0 || o.pace >= 1 {
		return fmt.Errorf("-pace %g: want 0 (no paced run) or a fraction below 1", o.pace)
	}
	if o.rounds < 1 {
		return fmt.Errorf("-rounds %d: at least 1", o.rounds)
	}
	if _, err := os.Stat(o.loop); err != nil {
		return fmt.Errorf("the Python loop: %w", err)
	}
	inputs := m.Inputs
	if o.only != "" {
		inputs = nil
		for _, name := range strings.Split(o.only, ",") {
			found := false
			for _, in := range m.Inputs {
				if in.Name == strings.TrimSpace(name) {
					inputs, found = append(inputs, in), true
				}
			}
			if !found {
				return fmt.Errorf("-only: no input %q in %s", name, o.inputs)
			}
		}
	}
	for _, d := range []string{"configs", "logs", "records"} {
		if err := os.MkdirAll(filepath.Join(o.out, d), 0o755); err != nil {
			return err
		}
	}
	sockDir, err := os.MkdirTemp("", "benchcmp")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sockDir)
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	model := abs(filepath.Join(o.inputs, m.Model))

	rep := &Report{Mode: o.mode, Started: time.Now().UTC().Format(time.RFC3339), Threads: o.threads,
		Warmup: o.warmup.String(), Measure: o.measure.String(), Pace: o.pace, Rounds: o.rounds, Manifest: m,
		System: systemInfo(o.edged, py), Notes: configNotes(o)}
	fmt.Printf("benchcmp: mode %s, %d input(s), ONNX Runtime threads %d, Python %s; report in %s\n", o.mode, len(inputs), o.threads, py, o.out)
	for _, n := range rep.Notes {
		fmt.Println("benchcmp: note:", n)
	}

	// One check up front: a model or configuration edged refuses fails
	// here with edged's own words, not as a missing socket.
	cfg0 := filepath.Join(o.out, "configs", "check.toml")
	if err := os.WriteFile(cfg0, []byte(edgedConfig(o, m, model, abs(filepath.Join(o.inputs, inputs[0].Path)), filepath.Join(sockDir, "check.sock"), 0)), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, o.edged, "check", "-config", cfg0).CombinedOutput(); err != nil {
		return fmt.Errorf("%s check -config %s: %w\n%s", o.edged, cfg0, err, out)
	}

	var all []*RunResult
	dump := func(r *RunResult) {
		all = append(all, r)
		round := ""
		if o.rounds > 1 {
			round = fmt.Sprintf(" r%d", r.Round)
		}
		fmt.Printf("  %-6s %-10s%s %7.1f results/s  cpu %6.2f ms/frame  rss %5.0f MiB  %s\n", r.Side, r.Phase, round, r.Throughput, r.CPUPerFrMs, r.RSSMaxMiB, stageLine(r))
	}
	for _, in := range inputs {
		fmt.Printf("%s (%dx%d %s, %d frames)\n", in.Name, in.Width, in.Height, in.Kind, in.Frames)
		for round := 1; round <= o.rounds; round++ {
			if err := runRound(ctx, o, m, in, round, py, model, sockDir, dump); err != nil {
				return err
			}
		}
	}
	rep.Runs = all
	rep.Finished = time.Now().UTC().Format(time.RFC3339)
	rep.System.LoadAvgEnd = loadAvg()
	rep.Inputs = inputs
	rep.compare()
	if err := rep.write(o.out); err != nil {
		return err
	}
	md, err := os.ReadFile(filepath.Join(o.out, "report.md"))
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\nreport: %s (report.md, results.json, plot.png, logs/, records/)\n", md, o.out)
	return nil
}

// runRound runs, on one input, edged then the Python loop as fast as they
// go, then both paced at -pace × the lower of their throughputs.
func runRound(ctx context.Context, o *options, m *Manifest, in Input, round int, py, model, sockDir string, dump func(*RunResult)) error {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	replay := abs(filepath.Join(o.inputs, in.Path))
	name := func(side, phase string) string {
		n := side + "-" + in.Name
		if phase != "" {
			n += "-" + phase
		}
		if o.rounds > 1 {
			n += fmt.Sprintf("-r%d", round)
		}
		return n
	}
	finish := func(r *RunResult, recs []arrival, base string) {
		saveRecords(filepath.Join(o.out, "records", base+".ndjson"), recs)
		if r != nil {
			r.Round = round
			dump(r)
		}
	}
	edgedRun := func(phase string, fps float64) (*RunResult, error) {
		base := name("edged", phase)
		cfg := filepath.Join(o.out, "configs", base+".toml")
		sock := filepath.Join(sockDir, "edged.sock")
		if err := os.WriteFile(cfg, []byte(edgedConfig(o, m, model, replay, sock, fps)), 0o644); err != nil {
			return nil, err
		}
		r, recs, err := measure(ctx, runSpec{Side: "edged", Input: in.Name, Phase: phase, PaceFPS: fps,
			Argv: []string{o.edged, "run", "-config", cfg}, Socket: sock, Log: filepath.Join(o.out, "logs", base+".log"),
			Warmup: o.warmup, Measure: o.measure, StartTimeout: o.startTimeout})
		finish(r, recs, base)
		return r, err
	}
	pyRun := func(phase string, fps float64) (*RunResult, error) {
		sock := filepath.Join(sockDir, "py.sock")
		argv := []string{py, "-u", o.loop, "--replay", replay, "--socket", sock, "--threads", fmt.Sprint(o.threads),
			"--size", fmt.Sprint(m.InputSize), "--duration", fmt.Sprint((o.warmup + o.measure + 30*time.Second).Seconds())}
		if o.mode == "pre" {
			argv = append(argv, "--pre-only")
		} else {
			argv = append(argv, "--model", model)
		}
		if fps > 0 {
			argv = append(argv, "--fps", fmt.Sprint(fps))
		}
		if o.set["cv-threads"] {
			argv = append(argv, "--cv-threads", fmt.Sprint(o.cvThreads))
		}
		base := name("python", phase)
		r, recs, err := measure(ctx, runSpec{Side: "python", Input: in.Name, Phase: phase, PaceFPS: fps, Argv: argv, Socket: sock,
			Log: filepath.Join(o.out, "logs", base+".log"), Warmup: o.warmup, Measure: o.measure, StartTimeout: o.startTimeout})
		finish(r, recs, base)
		return r, err
	}
	esat, err := edgedRun("saturation", 0)
	if err != nil {
		return err
	}
	psat, err := pyRun("saturation", 0)
	if err != nil || o.pace == 0 {
		return err
	}
	// Both sides paced at one rate both keep up with.
	fps := min(max(math.Floor(o.pace*min(esat.Throughput, psat.Throughput)), 1), 1000)
	if _, err := edgedRun("paced", fps); err != nil {
		return err
	}
	_, err = pyRun("paced", fps)
	return err
}

// rewrite renders a report folder again from its results.json.
func rewrite(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	rep.Comparisons, rep.PythonInfo = nil, nil
	rep.compare()
	return rep.write(dir)
}

// stageLine is a one-line p50 summary for the progress output.
func stageLine(r *RunResult) string {
	var b strings.Builder
	for _, st := range append(append([]string{}, stages...), Overhead) {
		if d, ok := r.Stages[st]; ok {
			fmt.Fprintf(&b, " %s %.0f", st, d.P50)
		}
	}
	return "p50 µs:" + b.String()
}

func saveRecords(path string, recs []arrival) {
	if len(recs) == 0 {
		return
	}
	var b []byte
	for _, a := range recs {
		line, err := json.Marshal(a.rec)
		if err != nil {
			continue
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "benchcmp:", errors.Unwrap(err))
	}
}

// configNotes says what the generated edged configuration sets beyond
// today's keys.
func configNotes(o *options) []string {
	var n []string
	if o.set["edged-device"] {
		n = append(n, fmt.Sprintf("edged config sets [pipeline.preprocess] device = %q (-edged-device); an edged without that key refuses the config", o.edgedDevice))
	}
	if o.set["edged-pre-threads"] {
		n = append(n, fmt.Sprintf("edged config sets [pipeline.preprocess] threads = %d (-edged-pre-threads); an edged without that key refuses the config", o.edgedPreThreads))
	}
	return n
}

// edgedConfig is the configuration of one edged run: the replay file
// looping (fps 0: the recorded pace, and benchgen records no gaps, so as
// fast as the pipeline takes frames; fps > 0: that rate), the model with
// the harness's thread count, every frame in order (schedule = "queue"),
// ImageNet normalisation, top-5 and an NDJSON socket.
func edgedConfig(o *options, m *Manifest, model, replay, sock string, fps float64) string {
	var b strings.Builder
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	fmt.Fprintf(&b, "# written by benchcmp\n[daemon]\nlog_level = \"info\"\nstall_timeout = \"60s\"\n")
	if o.ortLib != "" {
		fmt.Fprintf(&b, "onnxruntime_lib = %s\n", q(o.ortLib))
	}
	fmt.Fprintf(&b, "\n[[source]]\nname = \"bench\"\nkind = \"replay\"\npath = %s\nloop = true\nfps = %g\nfree_run = %t\nbuffers = 4\n", q(replay), fps, fps == 0)
	fmt.Fprintf(&b, "\n[[model]]\nname = \"bench\"\npath = %s\nbackend = \"onnx\"\nreload = false\nthreads = %d\n", q(model), o.threads)
	fmt.Fprintf(&b, "\n[[pipeline]]\nname = \"bench\"\nsource = \"bench\"\nmodel = \"bench\"\nsinks = [\"out\"]\nschedule = \"queue\"\nqueue = 4\n")
	fmt.Fprintf(&b, "\n[pipeline.preprocess]\ninput = %s\nresize = \"stretch\"\ncolor = \"rgb\"\nscale = 0.00392156862745098\nmean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\n", q(m.InputName))
	if o.set["edged-device"] {
		fmt.Fprintf(&b, "device = %s\n", q(o.edgedDevice))
	}
	if o.set["edged-pre-threads"] {
		fmt.Fprintf(&b, "threads = %d\n", o.edgedPreThreads)
	}
	fmt.Fprintf(&b, "\n[[pipeline.postprocess]]\noutput = %s\nkind = \"topk\"\nk = 5\n", q(m.OutputName))
	fmt.Fprintf(&b, "\n[[sink]]\nname = \"out\"\nkind = \"socket\"\npath = %s\nclient_queue = 4096\n", q(sock))
	return b.String()
}
