package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Report is results.json.
type Report struct {
	Mode        string          `json:"mode"` // e2e | pre
	Started     string          `json:"started"`
	Finished    string          `json:"finished"`
	Threads     int             `json:"ort_threads"`
	Warmup      string          `json:"warmup"`
	Measure     string          `json:"measure"`
	Pace        float64         `json:"pace"`
	Rounds      int             `json:"rounds"`
	System      System          `json:"system"`
	Notes       []string        `json:"notes,omitempty"`
	Manifest    *Manifest       `json:"manifest"`
	Inputs      []Input         `json:"inputs_run"`
	Runs        []*RunResult    `json:"runs"`
	Comparisons []*Comparison   `json:"comparisons"`
	Goals       []Goal          `json:"goals"`
	PythonInfo  json.RawMessage `json:"python_info,omitempty"`
}

// System describes the machine.
type System struct {
	NProc        int    `json:"nproc"`
	CPU          string `json:"cpu"`
	GPU          string `json:"gpu,omitempty"`
	Kernel       string `json:"kernel"`
	Edged        string `json:"edged"`
	Python       string `json:"python"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

func systemInfo(edged, py string) System {
	s := System{NProc: runtime.NumCPU(), Python: py, LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				s.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		s.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader").Output(); err == nil {
		s.GPU = strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; ")), " ")
	}
	if out, err := exec.Command(edged, "version").Output(); err == nil {
		s.Edged = strings.TrimSpace(string(out))
	}
	return s
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Row is one statistic of both sides; nil is "not measured".
type Row struct {
	Name       string   `json:"name"`
	Unit       string   `json:"unit"`
	Edged      *float64 `json:"edged"`
	Python     *float64 `json:"python"`
	Ratio      *float64 `json:"ratio,omitempty"` // edged / python, where comparable
	Comparable bool     `json:"comparable"`
}

// Comparison is one input's rows.
type Comparison struct {
	Input   string     `json:"input"`
	Latency *RunResult `json:"-"` // edged, paced (or saturation with -pace 0)
	Sat     *RunResult `json:"-"` // edged, saturation
	Python  *RunResult `json:"-"` // Python, paced (or saturation with -pace 0)
	PySat   *RunResult `json:"-"` // Python, saturation
	Rounds  int        `json:"rounds"`
	Rows    []Row      `json:"rows"`
}

// medianRun folds the runs of several rounds into one: each statistic
// (a stage's p50, p99 and mean, throughput, CPU per frame, RSS) is the
// median over the rounds; counts are summed. One run is returned as is.
func medianRun(runs []*RunResult) *RunResult {
	switch len(runs) {
	case 0:
		return nil
	case 1:
		return runs[0]
	}
	med := func(v func(*RunResult) float64) float64 {
		var vals []float64
		for _, r := range runs {
			vals = append(vals, v(r))
		}
		slices.Sort(vals)
		n := len(vals)
		return (vals[(n-1)/2] + vals[n/2]) / 2
	}
	m := *runs[0]
	m.Argv, m.Log = nil, fmt.Sprintf("median of %d rounds", len(runs))
	m.PaceFPS = med(func(r *RunResult) float64 { return r.PaceFPS })
	m.WindowS = med(func(r *RunResult) float64 { return r.WindowS })
	m.Throughput = med(func(r *RunResult) float64 { return r.Throughput })
	m.CPUS = med(func(r *RunResult) float64 { return r.CPUS })
	m.CPUPerFrMs = med(func(r *RunResult) float64 { return r.CPUPerFrMs })
	m.RSSAvgMiB = med(func(r *RunResult) float64 { return r.RSSAvgMiB })
	m.RSSMaxMiB = med(func(r *RunResult) float64 { return r.RSSMaxMiB })
	m.HWMMiB = med(func(r *RunResult) float64 { return r.HWMMiB })
	m.Results, m.Lost, m.Stages = 0, 0, map[string]Dist{}
	for _, r := range runs {
		m.Results += r.Results
		m.Lost += r.Lost
		for st := range r.Stages {
			m.Stages[st] = Dist{}
		}
	}
	for st := range m.Stages {
		var d Dist
		var in []*RunResult
		for _, r := range runs {
			if x, ok := r.Stages[st]; ok && x.N > 0 {
				in = append(in, r)
				d.N += x.N
				d.Max = max(d.Max, x.Max)
			}
		}
		all := runs
		runs = in
		d.P50 = med(func(r *RunResult) float64 { return r.Stages[st].P50 })
		d.P99 = med(func(r *RunResult) float64 { return r.Stages[st].P99 })
		d.Mean = med(func(r *RunResult) float64 { return r.Stages[st].Mean })
		runs = all
		m.Stages[st] = d
	}
	return &m
}

// Row returns the named row (nil if absent).
func (c *Comparison) Row(name string) *Row {
	for i := range c.Rows {
		if c.Rows[i].Name == name {
			return &c.Rows[i]
		}
	}
	return nil
}

// Goal is one target of issue 9.
type Goal struct {
	Goal   string   `json:"goal"`
	Value  *float64 `json:"value"`
	Target string   `json:"target"`
	Pass   bool     `json:"pass"`
}

func ptr(v float64) *float64 { return &v }

func stat(r *RunResult, stage string, p99 bool) *float64 {
	if r == nil {
		return nil
	}
	d, ok := r.Stages[stage]
	if !ok || d.N == 0 {
		return nil
	}
	if p99 {
		return ptr(d.P99)
	}
	return ptr(d.P50)
}

// compare pairs each input's runs into rows and evaluates the goals.
func (rep *Report) compare() {
	for _, in := range rep.Inputs {
		c := &Comparison{Input: in.Name}
		runs := map[string][]*RunResult{}
		for _, r := range rep.Runs {
			if r.Input != in.Name {
				continue
			}
			runs[r.Side+" "+r.Phase] = append(runs[r.Side+" "+r.Phase], r)
			if r.Side == "python" && rep.PythonInfo == nil {
				rep.PythonInfo = r.Info
			}
		}
		c.Sat, c.PySat = medianRun(runs["edged saturation"]), medianRun(runs["python saturation"])
		c.Latency, c.Python = medianRun(runs["edged paced"]), medianRun(runs["python paced"])
		c.Rounds = len(runs["edged saturation"])
		if c.Latency == nil {
			c.Latency = c.Sat
		}
		if c.Python == nil {
			c.Python = c.PySat
		}
		add := func(name, unit string, e, p *float64, comparable bool) {
			row := Row{Name: name, Unit: unit, Edged: e, Python: p, Comparable: comparable}
			if comparable && e != nil && p != nil && *p != 0 {
				row.Ratio = ptr(*e / *p)
			}
			c.Rows = append(c.Rows, row)
		}
		e2e := rep.Mode == "e2e"
		for _, st := range append(append([]string{}, stages...), Overhead) {
			cmp := e2e || st == "pre" || st == "fill"
			e50, p50 := stat(c.Latency, st, false), stat(c.Python, st, false)
			if e50 == nil && p50 == nil {
				continue
			}
			add(st+" p50", "µs", e50, p50, cmp)
			add(st+" p99", "µs", stat(c.Latency, st, true), stat(c.Python, st, true), cmp)
		}
		add("total p50 at saturation", "µs", stat(c.Sat, "total", false), stat(c.PySat, "total", false), e2e)
		f := func(r *RunResult, v func(*RunResult) float64) *float64 {
			if r == nil {
				return nil
			}
			return ptr(v(r))
		}
		add("throughput at saturation", "results/s", f(c.Sat, func(r *RunResult) float64 { return r.Throughput }), f(c.PySat, func(r *RunResult) float64 { return r.Throughput }), e2e)
		add("CPU time per frame", "ms", f(c.Sat, func(r *RunResult) float64 { return r.CPUPerFrMs }), f(c.PySat, func(r *RunResult) float64 { return r.CPUPerFrMs }), e2e)
		add("RSS average", "MiB", f(c.Sat, func(r *RunResult) float64 { return r.RSSAvgMiB }), f(c.PySat, func(r *RunResult) float64 { return r.RSSAvgMiB }), e2e)
		add("RSS peak (VmHWM)", "MiB", f(c.Sat, func(r *RunResult) float64 { return r.HWMMiB }), f(c.PySat, func(r *RunResult) float64 { return r.HWMMiB }), e2e)
		rep.Comparisons = append(rep.Comparisons, c)
	}
	rep.Goals = nil
	for _, c := range rep.Comparisons {
		if !strings.HasPrefix(c.Input, "noisy-1920x1080") {
			continue
		}
		ratio := func(name string) *float64 {
			if r := c.Row(name); r != nil {
				return r.Ratio
			}
			return nil
		}
		goal := func(name, target string, v *float64, ok func(float64) bool) {
			rep.Goals = append(rep.Goals, Goal{Goal: name, Value: v, Target: target, Pass: v != nil && ok(*v)})
		}
		if rep.Mode == "e2e" {
			goal("overhead p50 edged/python, noisy 1080p", "≤ 0.2", ratio("overhead p50"), func(v float64) bool { return v <= 0.2 })
			goal("throughput at saturation edged/python, noisy 1080p", "> 1", ratio("throughput at saturation"), func(v float64) bool { return v > 1 })
		}
		goal("preprocessing p50 edged/OpenCV, noisy 1080p -> 224", "≤ 0.5", ratio("pre p50"), func(v float64) bool { return v <= 0.5 })
	}
}

func (rep *Report) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	return writePlot(filepath.Join(dir, "plot.png"), rep)
}

func num(v *float64) string {
	if v == nil || math.IsNaN(*v) {
		return "—"
	}
	a := math.Abs(*v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", *v)
	case a >= 10:
		return fmt.Sprintf("%.1f", *v)
	default:
		return fmt.Sprintf("%.2f", *v)
	}
}

func ratioStr(r *Row) string {
	switch {
	case r == nil:
		return "—"
	case !r.Comparable:
		return "n/c"
	case r.Ratio == nil:
		return "—"
	}
	return fmt.Sprintf("%.2f", *r.Ratio)
}

func resultsOf(r *RunResult) int {
	if r == nil {
		return 0
	}
	return r.Results
}

func lostOf(r *RunResult) uint64 {
	if r == nil {
		return 0
	}
	return r.Lost
}

func (rep *Report) markdown() string {
	var b strings.Builder
	s := rep.System
	title := map[string]string{"e2e": "end to end (ONNX Runtime on both sides)", "pre": "preprocessing (Python without onnxruntime)"}[rep.Mode]
	fmt.Fprintf(&b, "# edged vs a Python loop: %s\n\n", title)
	fmt.Fprintf(&b, "- machine: %d CPUs, %s", s.NProc, s.CPU)
	if s.GPU != "" {
		fmt.Fprintf(&b, ", GPU %s", s.GPU)
	} else {
		fmt.Fprintf(&b, ", no GPU (nvidia-smi absent or failing)")
	}
	fmt.Fprintf(&b, "; Linux %s; load average %s at the start, %s at the end\n", s.Kernel, s.LoadAvgStart, s.LoadAvgEnd)
	fmt.Fprintf(&b, "- %s; Python %s %s\n", s.Edged, s.Python, string(rep.PythonInfo))
	fmt.Fprintf(&b, "- ONNX Runtime intra-op threads %d on both sides; per run %s warm-up, %s measured; latencies from both sides paced at %g × the lower saturated throughput (0: from the saturation runs); %d round(s) per input, statistics are medians over rounds\n",
		rep.Threads, rep.Warmup, rep.Measure, rep.Pace, max(rep.Rounds, 1))
	m := rep.Manifest
	fmt.Fprintf(&b, "- inputs: benchgen seed %d, model %s (sha256 %.12s, input %s [1,3,%d,%d])\n", m.Seed, m.Model, m.ModelSHA256, m.InputName, m.InputSize, m.InputSize)
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "- note: %s\n", n)
	}
	if rep.Mode == "pre" {
		fmt.Fprintf(&b, "- pre mode: only fill and pre are compared (n/c = not comparable: edged runs inference, the Python loop does not)\n")
	}
	if len(rep.Goals) > 0 {
		fmt.Fprintf(&b, "\n## Goals\n\n| goal | value | target | |\n|---|---:|---:|---|\n")
		for _, g := range rep.Goals {
			res := "FAIL"
			if g.Pass {
				res = "pass"
			}
			v := "—"
			if g.Value != nil {
				v = fmt.Sprintf("%.3f", *g.Value)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Goal, v, g.Target, res)
		}
	}
	fmt.Fprintf(&b, "\n## Summary: edged / Python (below 1: edged takes less; throughput above 1: edged is faster)\n\n")
	sum := []string{"pre p50", "overhead p50", "total p50", "throughput at saturation", "CPU time per frame", "RSS peak (VmHWM)"}
	fmt.Fprintf(&b, "| input | %s |\n|---|%s\n", strings.Join(sum, " | "), strings.Repeat("---:|", len(sum)))
	for _, c := range rep.Comparisons {
		fmt.Fprintf(&b, "| %s |", c.Input)
		for _, n := range sum {
			fmt.Fprintf(&b, " %s |", ratioStr(c.Row(n)))
		}
		b.WriteString("\n")
	}
	for _, c := range rep.Comparisons {
		fmt.Fprintf(&b, "\n## %s\n\n", c.Input)
		if c.Latency != nil && c.Latency != c.Sat {
			fmt.Fprintf(&b, "Latencies from both sides paced at %g frames/s (edged %d results, Python %d); throughput, CPU and RSS at saturation",
				c.Latency.PaceFPS, c.Latency.Results, resultsOf(c.Python))
		} else {
			fmt.Fprintf(&b, "All from the saturation runs")
		}
		fmt.Fprintf(&b, " (edged %d results, Python %d).", resultsOf(c.Sat), resultsOf(c.PySat))
		if c.Sat != nil && c.Sat.Lost+lostOf(c.Latency) > 0 {
			fmt.Fprintf(&b, " edged records lost to a slow reader: %d.", c.Sat.Lost+lostOf(c.Latency))
		}
		if c.Rounds > 1 {
			fmt.Fprintf(&b, " Each statistic is the median over %d rounds.", c.Rounds)
		}
		fmt.Fprintf(&b, "\n\n| stat | unit | edged | python | edged/python |\n|---|---|---:|---:|---:|\n")
		for i := range c.Rows {
			r := &c.Rows[i]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Name, r.Unit, num(r.Edged), num(r.Python), ratioStr(r))
		}
	}
	fmt.Fprintf(&b, "\n%s", stageNotes)
	return b.String()
}

const stageNotes = `## What the stages include

- edged: fill = the replay source reading the frame into its slot; queue = waiting for the inference
  loop; pre, infer, post as timed by the pipeline; encode = encoding and hand-off to the socket sink;
  total = from the start of the fill to the hand-off (the stages add up to it).
- Python: fill = reading the frame from the file; pre = cvtColor + resize + normalise + HWC->CHW;
  infer = sess.run; post = top-5; total = fill + pre + infer + post (+ timer reads); encode =
  json.dumps + sendall of the previous line, outside total.
- overhead = total − infer, per record, then percentiles.
- stage rows (p50, p99, overhead): both sides paced at the same frame rate, which both keep up with
  (edged: replay fps; Python: --fps, an untimed wait before reading, like a camera's blocking read).
- throughput, CPU time per frame, RSS and "total p50 at saturation": edged at saturation (free-running
  replay, schedule queue; its total then includes the wait in the queue), the Python loop as fast as
  it goes. CPU time is utime + stime over the window / frames.
- bench/README.md has the details and the caveats.
`
