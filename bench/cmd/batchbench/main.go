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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var nan = math.NaN()

type options struct {
	edged, ortLib, out string
	counts             []int
	ways, phases       []string
	fps                float64
	wait               time.Duration
	threads, hidden    int
	frames, rounds     int
	perf, device       string
	nvidiaSMI          string
	tm                 timing
	argv               []string
}

func main() {
	var o options
	flag.StringVar(&o.edged, "edged", "bin/edged", "the edged binary")
	flag.StringVar(&o.ortLib, "ort-lib", "", "libonnxruntime.so.1 for edged ([daemon] onnxruntime_lib; default: edged's own search, next to the binary first)")
	flag.StringVar(&o.out, "out", "", "report folder (default bin/batch-report/<UTC time>)")
	ns := flag.String("n", "1,2,4,8", "camera counts")
	ways := flag.String("ways", "own,shared,batched", "own (an engine per camera), shared (a pipeline per camera on one engine), batched (one pipeline, sources = [...]); a way the binary does not accept is left out, saying so")
	phases := flag.String("phases", "paced,saturation,stalled", "paced (every camera at -fps), saturation (free-running), stalled (at the largest -n: paced, the last camera stops after -stall-after)")
	flag.Float64Var(&o.fps, "fps", 15, "each camera's rate in the paced and stalled runs")
	flag.DurationVar(&o.wait, "wait", 2*time.Millisecond, "batch_wait of the batched pipeline")
	flag.IntVar(&o.threads, "threads", 1, "ONNX Runtime intra-op threads ([[model]] threads; 0: edged's default, 1 or a batched pipeline's batch capped at the cores)")
	flag.IntVar(&o.hidden, "hidden", 4096, "hidden units of the benchmark classifier (weights: hidden × 1000 × 4 bytes; 0: none)")
	flag.IntVar(&o.frames, "frames", 16, "frames of the noisy recording (1920x1080 YUYV, 4 MiB each), looped")
	flag.IntVar(&o.rounds, "rounds", 1, "runs of every case, interleaved; each figure is the median over rounds")
	flag.DurationVar(&o.tm.Warmup, "warmup", 2*time.Second, "after every camera's first result, before measuring")
	flag.DurationVar(&o.tm.Measure, "measure", 8*time.Second, "measured window of a run")
	flag.DurationVar(&o.tm.Start, "start-timeout", 60*time.Second, "until every camera has a result")
	stallAfter := flag.Duration("stall-after", 0, "how long the stalled camera plays before it stops (default: warm-up + a quarter of the window + 1 s of start)")
	flag.StringVar(&o.perf, "perf", "perf", "perf, to profile the free-running runs at the largest -n (a CPU profile by shared object and symbol in the report); \"\" or not found: none")
	flag.StringVar(&o.device, "device", "", "[pipeline.preprocess] device of every pipeline (auto, gpu, cpu); default: not written (auto: the GPU where CUDA is)")
	flag.StringVar(&o.nvidiaSMI, "nvidia-smi", "nvidia-smi", "nvidia-smi, to read the daemon's GPU memory in the window (a GPU machine); \"\" or not found: none")
	replot := flag.String("replot", "", "only rewrite report.md and batch.png of this report folder from its results.json")
	flag.Parse()
	if *replot != "" {
		if err := rewrite(*replot); err != nil {
			fmt.Fprintln(os.Stderr, "batchbench:", err)
			os.Exit(1)
		}
		return
	}
	o.argv = os.Args
	if o.perf != "" {
		if p, err := exec.LookPath(o.perf); err == nil {
			o.perf = p
		} else {
			fmt.Fprintf(os.Stderr, "batchbench: no profile: %v\n", err)
			o.perf = ""
		}
	}
	if o.nvidiaSMI != "" {
		o.nvidiaSMI, _ = exec.LookPath(o.nvidiaSMI) // none: no GPU memory column
	}
	var err error
	if o.counts, err = parseCounts(*ns); err != nil {
		fmt.Fprintln(os.Stderr, "batchbench:", err)
		os.Exit(2)
	}
	o.ways, o.phases = strings.Split(*ways, ","), strings.Split(*phases, ",")
	for _, w := range o.ways {
		if w != wayOwn && w != wayShared && w != wayBatched {
			fmt.Fprintf(os.Stderr, "batchbench: -ways: %q is not own, shared or batched\n", w)
			os.Exit(2)
		}
	}
	for _, p := range o.phases {
		if p != phasePaced && p != phaseSaturation && p != phaseStalled {
			fmt.Fprintf(os.Stderr, "batchbench: -phases: %q is not paced, saturation or stalled\n", p)
			os.Exit(2)
		}
	}
	if o.fps <= 0 || o.rounds < 1 || o.threads < 0 {
		fmt.Fprintln(os.Stderr, "batchbench: -fps and -rounds must be positive, -threads not negative")
		os.Exit(2)
	}
	if *stallAfter == 0 {
		*stallAfter = time.Second + o.tm.Warmup + o.tm.Measure/4
	}
	if o.out == "" {
		o.out = filepath.Join("bin", "batch-report", time.Now().UTC().Format("20060102T150405Z"))
	}
	// Absolute: the configurations name the inputs, and a relative path
	// in a configuration is relative to its file.
	if abs, err := filepath.Abs(o.out); err == nil {
		o.out = abs
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code, err := run(ctx, &o, *stallAfter)
	if err != nil {
		fmt.Fprintln(os.Stderr, "batchbench:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > 64 {
			return nil, fmt.Errorf("-n %q: want camera counts 1..64", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// run measures every case and writes the report; its code is 1 when a
// bound does not hold.
func run(ctx context.Context, o *options, stallAfter time.Duration) (int, error) {
	for _, d := range []string{"inputs", "configs", "logs"} {
		if err := os.MkdirAll(filepath.Join(o.out, d), 0o755); err != nil {
			return 0, err
		}
	}
	in, err := writeInputs(filepath.Join(o.out, "inputs"), o.frames, o.hidden, o.fps, stallAfter)
	if err != nil {
		return 0, err
	}
	defer os.Remove(in.Stalled) // hundreds of MB; the noisy file and the model stay for a re-run
	rep := &report{Argv: o.argv, Date: time.Now().UTC().Format(time.RFC3339), Edged: version(o.edged), Machine: machine(),
		FPS: o.fps, Wait: o.wait.String(), Threads: o.threads, Hidden: o.hidden, PoolBytes: poolBytes, StallAfterS: stallAfter.Seconds(),
		Counts: o.counts, Warmup: o.tm.Warmup.String(), Measure: o.tm.Measure.String(), Rounds: o.rounds}
	for _, w := range o.ways {
		if why := accepted(o, in, w); why != "" {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %s", w, why))
			fmt.Fprintf(os.Stderr, "batchbench: leaving out %s: %s\n", w, why)
			continue
		}
		rep.Ways = append(rep.Ways, w)
	}
	if len(rep.Ways) == 0 {
		return 0, errors.New("no way to run: " + strings.Join(rep.Skipped, "; "))
	}
	// By camera count, each phase's ways one after the other; the stalled
	// runs right after the paced ones they are compared with, so that the
	// machine's load changes as little as it can between them.
	var cases []caseSpec
	for _, n := range o.counts {
		for _, ph := range []string{phasePaced, phaseStalled, phaseSaturation} {
			if !slices.Contains(o.phases, ph) || (ph == phaseStalled && n != o.counts[len(o.counts)-1]) {
				continue
			}
			for _, w := range rep.Ways {
				cases = append(cases, caseSpec{Way: w, N: n, Phase: ph, FPS: o.fps, Wait: o.wait, Threads: o.threads, Device: o.device})
			}
		}
	}
	// Then, once, each way free-running at the largest N under perf.
	var profiled []caseSpec
	if o.perf != "" && slices.Contains(o.phases, phaseSaturation) {
		for _, w := range rep.Ways {
			profiled = append(profiled, caseSpec{Way: w, N: o.counts[len(o.counts)-1], Phase: phaseSaturation, FPS: o.fps, Wait: o.wait, Threads: o.threads, Device: o.device, Profiled: true})
		}
	}
	for round := 1; round <= o.rounds; round++ {
		todo := cases
		if round == o.rounds {
			todo = append(slices.Clone(cases), profiled...)
		}
		for i, c := range todo {
			base := fmt.Sprintf("%s-r%d", c.name(), round)
			cfg := filepath.Join(o.out, "configs", base+".toml")
			sock := filepath.Join(os.TempDir(), fmt.Sprintf("batchbench-%d.sock", os.Getpid()))
			if err := os.WriteFile(cfg, []byte(configText(c, in, sock, o.ortLib)), 0o644); err != nil {
				return 0, err
			}
			perf := ""
			if c.Profiled {
				perf = o.perf
			}
			r, err := measure(ctx, o.edged, cfg, sock, filepath.Join(o.out, "logs", base+".log"), c, o.tm, perf, o.nvidiaSMI)
			if err != nil {
				return 0, err
			}
			r.Round = round
			rep.Runs = append(rep.Runs, r)
			fmt.Fprintf(os.Stderr, "batchbench: [%d/%d] %s round %d: %.1f results/s, p50 %.1f ms, p99 %.1f ms, RSS %.1f MiB, %.2f ms CPU a result, batch %.2f, %d replaced\n",
				(round-1)*len(cases)+i+1, o.rounds*len(cases)+len(profiled), c.name(), round, r.ResultsPS, r.pooled(50, all)/1000, r.pooled(99, all)/1000,
				mib(r.RSS), r.CPUms, r.MeanBatch, r.Replaced)
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(o.out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return 0, err
	}
	code, err := rep.write(o.out)
	if err == nil {
		fmt.Fprintf(os.Stderr, "batchbench: report in %s (report.md, batch.png, results.json, configs/, logs/)\n", o.out)
	}
	return code, err
}

func all(string) bool { return true }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// accepted says why edged does not take the way's configuration ("" when
// it does): `edged check` of its paced case at N = 2.
func accepted(o *options, in inputs, way string) string {
	c := caseSpec{Way: way, N: 2, Phase: phasePaced, FPS: o.fps, Wait: o.wait, Threads: o.threads, Device: o.device}
	cfg := filepath.Join(o.out, "configs", "check-"+way+".toml")
	if err := os.WriteFile(cfg, []byte(configText(c, in, filepath.Join(os.TempDir(), "batchbench-check.sock"), o.ortLib)), 0o644); err != nil {
		return err.Error()
	}
	out, err := exec.Command(o.edged, "check", "-config", cfg).CombinedOutput()
	if err != nil {
		// The first line that says what is wrong: a FAIL, else the first.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		why := lines[0]
		for _, l := range lines {
			if strings.Contains(l, "FAIL") {
				why = strings.TrimSpace(l)
				break
			}
		}
		return fmt.Sprintf("edged check -config %s: %v: %s", cfg, err, why)
	}
	return ""
}

// version is edged's version line.
func version(edged string) string {
	out, err := exec.Command(edged, "version").CombinedOutput()
	if err != nil {
		return edged + " (version: " + err.Error() + ")"
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}

// machine describes the host: CPU model, cores, load.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = ", load " + strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%s, %d cores%s", model, numCPU(), load)
}
