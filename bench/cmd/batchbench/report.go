package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
)

// report is results.json: every run, and what the report was made with.
type report struct {
	Argv        []string     `json:"argv"`
	Date        string       `json:"date"`
	Edged       string       `json:"edged"`
	Machine     string       `json:"machine"`
	FPS         float64      `json:"fps"`
	Wait        string       `json:"batch_wait"`
	Threads     int          `json:"threads"`
	Hidden      int          `json:"hidden"`
	PoolBytes   int64        `json:"pool_bytes"`
	StallAfterS float64      `json:"stall_after_s"`
	Counts      []int        `json:"counts"`
	Ways        []string     `json:"ways"`
	Skipped     []string     `json:"skipped,omitempty"`
	Warmup      string       `json:"warmup"`
	Measure     string       `json:"measure"`
	Rounds      int          `json:"rounds"`
	Runs        []*runResult `json:"runs"`
}

func numCPU() int { return goruntime.NumCPU() }

// fig is one case's figures, each the median over its rounds.
type fig struct {
	ok                   bool
	resultsPS, cpuMs     float64
	p50, p99             float64 // µs, every camera
	rss, hwm, gpu        float64 // bytes
	batch, replacedPS    float64
	othersP99, stalledAt float64 // stalled: the cameras but the last; when the last one's last result came
}

func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return nan
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// figure is the case's figures over its rounds.
func (rep *report) figure(way string, n int, phase string) fig {
	var f fig
	var cols [11][]float64
	for _, r := range rep.Runs {
		c := r.Case
		if c.Way != way || c.N != n || c.Phase != phase || c.Profiled {
			continue
		}
		f.ok = true
		last := cameraName(n - 1)
		others := func(cam string) bool { return cam != last }
		for i, v := range []float64{r.ResultsPS, r.CPUms, r.pooled(50, all), r.pooled(99, all), float64(r.RSS), float64(r.HWM),
			r.MeanBatch, float64(r.Replaced) / r.WindowS, r.pooled(99, others), r.Cameras[last].LastS, float64(r.GPU)} {
			cols[i] = append(cols[i], v)
		}
	}
	m := make([]float64, len(cols))
	for i := range cols {
		m[i] = median(cols[i])
	}
	f.resultsPS, f.cpuMs, f.p50, f.p99, f.rss, f.hwm, f.batch, f.replacedPS, f.othersP99, f.stalledAt, f.gpu = m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9], m[10]
	return f
}

// waitUs is the batch_wait a way's fairness bound allows: the batched
// pipeline's, 0 for pipelines of one camera (nothing waits for a batch).
func (rep *report) waitUs(way string) float64 {
	if way != wayBatched {
		return 0
	}
	for _, r := range rep.Runs {
		if r.Case.Way == wayBatched {
			return float64(r.Case.Wait.Microseconds())
		}
	}
	return 0
}

func ms(us float64) string {
	if math.IsNaN(us) {
		return "–"
	}
	return fmt.Sprintf("%.1f", us/1000)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// write writes report.md and batch.png into dir and prints the report;
// its code is 1 when the memory bound of a way that shares the model
// (shared, batched) or the batched pipeline's fairness bound does not
// hold; the own way's figures are the reference.
func (rep *report) write(dir string) (int, error) {
	var b strings.Builder
	code := rep.markdown(&b)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return 0, err
	}
	fmt.Print(b.String())
	return code, rep.plot(filepath.Join(dir, "batch.png"))
}

// rewrite rewrites report.md and batch.png from dir/results.json.
func rewrite(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	_, err = rep.write(dir)
	return err
}

// md writes the report's markdown.
type md struct {
	rep *report
	b   *strings.Builder
}

func (m md) p(format string, a ...any) { fmt.Fprintf(m.b, format, a...) }

// head writes a table head: N, then each way's columns, then each way's
// ratio to the first way.
func (m md) head(cols ...string) {
	m.p("| N |")
	for _, w := range m.rep.Ways {
		for _, c := range cols {
			m.p(" %s: %s |", w, c)
		}
	}
	for _, w := range m.rep.Ways[1:] {
		m.p(" %s / %s |", w, m.rep.Ways[0])
	}
	m.p("\n|---|%s\n", strings.Repeat("---|", len(m.rep.Ways)*len(cols)+len(m.rep.Ways)-1))
}

// rows writes a row per camera count: each way's cells, then the ratios
// of key to the first way's.
func (m md) rows(phase string, cells func(f fig) []string, key func(f fig) float64) {
	for _, n := range m.rep.Counts {
		m.p("| %d |", n)
		base := m.rep.figure(m.rep.Ways[0], n, phase)
		for _, w := range m.rep.Ways {
			for _, c := range cells(m.rep.figure(w, n, phase)) {
				m.p(" %s |", c)
			}
		}
		for _, w := range m.rep.Ways[1:] {
			m.p(" %s |", ratio(key(m.rep.figure(w, n, phase)), key(base)))
		}
		m.p("\n")
	}
	m.p("\n")
}

func (rep *report) has(phase string) bool {
	return slices.ContainsFunc(rep.Runs, func(r *runResult) bool { return r.Case.Phase == phase })
}

// markdown writes the report; its code is 1 when a bound does not hold.
func (rep *report) markdown(b *strings.Builder) int {
	m := md{rep, b}
	m.p("# batchbench %s\n\n`%s`\n\n%s; %s. Replay cameras of noisy 1920×1080 YUYV (buffers %d: a frame pool of %d slots, %.1f MiB), ONNX Runtime on the CPU (%s), the benchmark classifier with a symbolic batch dimension (hidden layer %d), batch_wait %s; each run: warm-up %s after every camera's first result, window %s; %d round(s), medians.\n\n",
		rep.Date, strings.Join(rep.Argv, " "), rep.Edged, rep.Machine, buffers, poolSlots, mib(rep.PoolBytes), threadsText(rep.Threads), rep.Hidden, rep.Wait, rep.Warmup, rep.Measure, rep.Rounds)
	for _, s := range rep.Skipped {
		m.p("Left out: %s\n\n", s)
	}
	if rep.has(phaseSaturation) {
		m.p("## Throughput: every camera free-running\n\nresults/s in total (CPU ms per result, mean frames per inference); ratios of results/s.\n\n")
		m.head("results/s")
		m.rows(phaseSaturation, func(f fig) []string {
			return []string{fmt.Sprintf("%.1f (%.2f ms, batch %.2f)", f.resultsPS, f.cpuMs, f.batch)}
		}, func(f fig) float64 { return f.resultsPS })
	}
	code := 0
	if rep.has(phasePaced) {
		m.p("## Latency and memory: every camera at %g fps\n\n`latency_us.total` over every camera's results, p50 / p99 in ms; ratios of p99.\n\n", rep.FPS)
		m.head("results/s", "p50 / p99 ms")
		m.rows(phasePaced, func(f fig) []string {
			return []string{fmt.Sprintf("%.1f", f.resultsPS), ms(f.p50) + " / " + ms(f.p99)}
		}, func(f fig) float64 { return f.p99 })
		code = max(code, m.memory())
	}
	rep.stages(m.p)
	if rep.has(phaseStalled) {
		code = max(code, m.fairness())
	}
	rep.profiles(m.p)
	return code
}

// memory writes the paced runs' RSS (and GPU memory) and judges the
// bound; 1 when a way that shares the model is over it.
func (m md) memory() int {
	rep := m.rep
	m.p("Resident memory (VmRSS, median of the window's readings every 100 ms; MiB); ratios of RSS.\n\n")
	m.head("RSS MiB")
	m.rows(phasePaced, func(f fig) []string { return []string{fmt.Sprintf("%.1f", f.rss/(1<<20))} }, func(f fig) float64 { return f.rss })
	if slices.ContainsFunc(rep.Runs, func(r *runResult) bool { return r.GPU > 0 }) {
		m.p("GPU memory (nvidia-smi's used_memory of the daemon, half way through the window; MiB); ratios.\n\n")
		m.head("GPU MiB")
		m.rows(phasePaced, func(f fig) []string { return []string{fmt.Sprintf("%.0f", f.gpu/(1<<20))} }, func(f fig) float64 { return f.gpu })
	}
	lo, hi := rep.Counts[0], rep.Counts[len(rep.Counts)-1]
	if hi == lo {
		return 0
	}
	code := 0
	bound := float64(hi-lo) * float64(rep.PoolBytes) * 1.1
	m.p("RSS(%d) − RSS(%d) against %d × one camera's frame pool (%.1f MiB) + 10 %% = %.1f MiB:\n\n", hi, lo, hi-lo, mib(rep.PoolBytes), bound/(1<<20))
	for _, w := range rep.Ways {
		d := rep.figure(w, hi, phasePaced).rss - rep.figure(w, lo, phasePaced).rss
		verdict := "holds"
		if math.IsNaN(d) || d > bound {
			verdict = "does not hold"
			if w != wayOwn {
				code = 1
			}
		}
		m.p("- %s: %.1f MiB (%.1f MiB per added camera): %s\n", w, d/(1<<20), d/(1<<20)/float64(hi-lo), verdict)
	}
	m.p("\n")
	return code
}

// fairness writes the stalled runs against the paced ones; 1 when the
// batched pipeline's bound does not hold (the other ways are references:
// nothing of theirs waits for a batch).
func (m md) fairness() int {
	rep, code := m.rep, 0
	n := rep.Counts[len(rep.Counts)-1]
	m.p("## Fairness: %d cameras at %g fps, %s stops delivering after %.1f s (unannounced)\n\n", n, rep.FPS, cameraName(n-1), rep.StallAfterS)
	m.p("p99 of `total` of the other %d cameras, stalled run against the paced run's same cameras; bound: unstalled p99 + batch_wait (0 for one camera per pipeline).\n\n", n-1)
	m.p("| way | unstalled p99 ms | stalled p99 ms | bound ms | results/s | last result of %s (s into the window) | |\n|---|---|---|---|---|---|---|\n", cameraName(n-1))
	for _, w := range rep.Ways {
		un, st := rep.othersUnstalled(w, n), rep.figure(w, n, phaseStalled)
		bound := un + rep.waitUs(w)
		verdict := "holds"
		if math.IsNaN(st.othersP99) || math.IsNaN(bound) || st.othersP99 > bound {
			verdict = "does not hold"
			if w == wayBatched {
				code = 1
			}
		}
		if w != wayBatched {
			verdict += " (reference: nothing waits for a batch)"
		}
		m.p("| %s | %s | %s | %s | %.1f | %.1f | %s |\n", w, ms(un), ms(st.othersP99), ms(bound), st.resultsPS, st.stalledAt, verdict)
	}
	m.p("\n")
	return code
}

// stageOrder is latency_us's order (docs/PROTOCOL.md); a stage not
// listed follows, by name.
var stageOrder = []string{"fill", "queue", "batch", "pre", "infer", "post", "encode", "total"}

// stages writes the mean of every latency_us stage per result, per way,
// at the largest N.
func (rep *report) stages(p func(string, ...any)) {
	n := rep.Counts[len(rep.Counts)-1]
	seen := map[string]bool{}
	for _, r := range rep.Runs {
		for k := range r.Stages {
			seen[k] = true
		}
	}
	if !seen["total"] {
		return
	}
	var cols []string
	for _, k := range stageOrder {
		if seen[k] {
			cols = append(cols, k)
			delete(seen, k)
		}
	}
	// Stages this list does not know go before total.
	cols = append(append(cols[:len(cols)-1], slices.Sorted(maps.Keys(seen))...), "total")
	p("## Where a result's time goes: %d cameras\n\nMean of each `latency_us` stage per result, ms (the stages add up to `total`); per inference, `infer` is shared by the frames of a batch.\n\n| way | phase | %s |\n|---|---|%s\n", n, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, ph := range []string{phasePaced, phaseSaturation} {
		for _, w := range rep.Ways {
			var v [][]float64 = make([][]float64, len(cols))
			for _, r := range rep.Runs {
				if r.Case.Way == w && r.Case.N == n && r.Case.Phase == ph && !r.Case.Profiled {
					for i, k := range cols {
						v[i] = append(v[i], r.Stages[k])
					}
				}
			}
			if len(v[0]) == 0 {
				continue
			}
			p("| %s | %s |", w, ph)
			for i := range cols {
				p(" %.2f |", median(v[i])/1000)
			}
			p("\n")
		}
	}
	p("\n")
}

// profiles writes the perf profiles of the free-running runs.
func (rep *report) profiles(p func(string, ...any)) {
	for _, r := range rep.Runs {
		if r.Profile == "" {
			continue
		}
		p("## CPU profile: %s (an extra run under perf record -e cpu-clock -F 499 over the window, %.1f results/s, not in the tables; shares of the process's samples)\n\n```\n%s```\n\n", r.Case.name(), r.ResultsPS, r.Profile)
	}
}

// othersUnstalled is the paced run's p99 over the cameras but the last.
func (rep *report) othersUnstalled(way string, n int) float64 {
	var v []float64
	last := cameraName(n - 1)
	for _, r := range rep.Runs {
		if r.Case.Way == way && r.Case.N == n && r.Case.Phase == phasePaced && !r.Case.Profiled {
			v = append(v, r.pooled(99, func(cam string) bool { return cam != last }))
		}
	}
	return median(v)
}

// threadsText says the [[model]] threads the runs wrote.
func threadsText(n int) string {
	if n == 0 {
		return "threads = 0: edged's default, 1 a pipeline of one camera, a batched pipeline's batch capped at the cores"
	}
	return fmt.Sprintf("%d intra-op thread(s)", n)
}
