package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edged-dev/edged/bench/internal/plot"
)

// Row is one sampler line of samples.csv: the judged Sample and context.
type Row struct {
	Sample
	Phase      int     // phaseQuietBefore, phaseChurn, phaseQuietAfter
	received   int64   // the monitor's results + records lost to gaps
	FDsMetric  float64 // edged_open_fds (edged's own count)
	Clients    float64 // edged_stream_clients of the socket sink
	Generation float64 // engine generation serving the pipeline
	SHA        string  // its SHA-256 prefix
	SerialUp   float64 // edged_serial_up of the serial sink
	IMUUp      float64 // edged_source_up of the serial sensor
}

func f(v float64, prec int) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func writeCSV(path string, rows []Row) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(fh)
	w.Write([]string{"t_s", "phase", "rss_mib", "fds", "goroutines", "results_total", "results_per_s", "fds_metric", "clients", "generation", "sha256", "serial_up", "imu_up"})
	for _, r := range rows {
		w.Write([]string{f(r.T, 2), phaseNames[r.Phase], f(r.RSSMiB, 2), f(r.FDs, 0), f(r.Goroutines, 0), f(r.ResultsTotal, 0), f(r.ResultsPerS, 1),
			f(r.FDsMetric, 0), f(r.Clients, 0), f(r.Generation, 0), r.SHA, f(r.SerialUp, 0), f(r.IMUUp, 0)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// MarshalJSON writes NaN (a window too short to judge) as null.
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	type out struct {
		plain
		First  *float64 `json:"first"`
		Last   *float64 `json:"last"`
		Growth *float64 `json:"growth"`
	}
	num := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		return &v
	}
	return json.Marshal(out{plain: plain(c), First: num(c.First), Last: num(c.Last), Growth: num(c.Growth)})
}

// Summary is summary.json.
type Summary struct {
	Date        string             `json:"date"`
	Machine     string             `json:"machine,omitempty"`
	Edged       string             `json:"edged"`
	Duration    string             `json:"duration"`
	SpanS       float64            `json:"span_s"` // first to last sample
	FPS         float64            `json:"fps"`
	Frame       string             `json:"frame"`
	Seed        uint64             `json:"seed"`
	Pass        bool               `json:"pass"`
	Checks      []Check            `json:"checks"`
	Tolerances  Tolerances         `json:"tolerances"`
	Counts      map[string]int     `json:"counts"`
	Events      map[string]int     `json:"status_events"`
	Times       map[string]TimeSum `json:"times_s"`
	ResultsPerS TimeSum            `json:"results_per_s"`
	Monitor     map[string]uint64  `json:"monitor"`
	Serial      map[string]int64   `json:"serial"`
	Metrics     map[string]float64 `json:"final_metrics"`
	LogLines    map[string]int     `json:"log_lines"`
	ExitCode    int                `json:"exit_code"`
	StopS       float64            `json:"stop_s"`
	// Quiet: medians of the seconds before the churn and after it, with
	// only the monitor client connected (reported, not judged).
	Quiet [2]QuietSum `json:"quiet_before_after"`
	// TrendPerH: least-squares slopes after the warm-up, per hour
	// (reported, not judged).
	TrendPerH map[string]float64 `json:"trend_per_hour,omitempty"`
	Problems  []string           `json:"problems"`
	Notes     []string           `json:"notes,omitempty"`
	// MQTT: what the subscriber of the MQTT sink received (nil: -mqtt=false).
	MQTT *MQTTSum `json:"mqtt,omitempty"`
	// Replay: whether the replay part ran (-replay).
	Replay bool `json:"replay"`
}

// QuietSum is what a quiet stretch looked like (medians).
type QuietSum struct {
	Samples    int     `json:"samples"`
	RSSMiB     float64 `json:"rss_mib"`
	FDs        float64 `json:"fds"`
	Goroutines float64 `json:"goroutines"`
}

// TimeSum summarises a list of values.
type TimeSum struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func summarise(v []float64) TimeSum {
	var ok []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return TimeSum{}
	}
	t := TimeSum{N: len(ok), Median: Median(ok), Min: ok[0], Max: ok[0]}
	for _, x := range ok {
		t.Min, t.Max = math.Min(t.Min, x), math.Max(t.Max, x)
	}
	return t
}

// report judges the run, writes samples.csv, soak.png, summary.txt and
// summary.json, prints the summary and returns the verdict.
func (s *soak) report() (bool, error) {
	// Judged: the churn. The quiet seconds before and after are reported.
	var samples []Sample
	var rates []float64
	quiet := [2][]Row{}
	for _, r := range s.rows {
		switch r.Phase {
		case phaseChurn:
			samples = append(samples, r.Sample)
			rates = append(rates, r.ResultsPerS)
		case phaseQuietBefore:
			quiet[0] = append(quiet[0], r)
		case phaseQuietAfter:
			quiet[1] = append(quiet[1], r)
		}
	}
	checks := Judge(samples, s.o.tol)
	pass := len(s.problems) == 0
	for _, c := range checks {
		pass = pass && c.OK
	}
	sum := Summary{
		Date: s.t0.UTC().Format(time.RFC3339), Machine: s.o.machine, Edged: s.version(), Duration: s.o.duration.String(),
		FPS: s.o.fps, Frame: fmt.Sprintf("%dx%d", s.o.width, s.o.height), Seed: s.o.seed, Pass: pass,
		Checks: checks, Tolerances: s.o.tol, Counts: s.counts, Times: map[string]TimeSum{},
		ResultsPerS: summarise(rates), Problems: s.problems, Notes: s.notes, ExitCode: s.exitCode, StopS: s.stopTook.Seconds(),
		Metrics: map[string]float64{}, LogLines: logLevels(filepath.Join(s.out, "edged.log")),
		MQTT: s.mqttSum, Replay: s.o.replay,
	}
	if len(samples) > 0 {
		sum.SpanS = samples[len(samples)-1].T - samples[0].T
	}
	if len(samples) > 0 {
		from := s.o.tol.Warmup * sum.SpanS
		sum.TrendPerH = map[string]float64{}
		for k, get := range map[string]func(Sample) float64{
			"rss_mib": func(x Sample) float64 { return x.RSSMiB }, "fds": func(x Sample) float64 { return x.FDs },
			"goroutines": func(x Sample) float64 { return x.Goroutines },
		} {
			if v := Slope(samples, from, get); !math.IsNaN(v) {
				sum.TrendPerH[k] = v
			}
		}
	}
	for i, q := range quiet {
		var rss, fds, gor []float64
		for _, r := range q {
			rss, fds, gor = append(rss, r.RSSMiB), append(fds, r.FDs), append(gor, r.Goroutines)
		}
		sum.Quiet[i] = QuietSum{Samples: len(q), RSSMiB: summarise(rss).Median, FDs: summarise(fds).Median, Goroutines: summarise(gor).Median}
	}
	for k, v := range s.times {
		sum.Times[k] = summarise(v)
	}
	if s.mon != nil {
		sum.Events = s.mon.eventCounts()
		s.mon.mu.Lock()
		sum.Monitor = map[string]uint64{"results": uint64(s.mon.results), "missed": s.mon.missed, "connects": uint64(s.mon.connects)}
		s.mon.mu.Unlock()
	}
	sum.Serial = map[string]int64{"imu_lines_written": s.imuSent.Load(), "uart_records_decoded": s.uartSt.records.Load(),
		"uart_crc_errors": s.uartSt.crcErrors.Load(), "uart_frame_errors": s.uartSt.frameErrors.Load()}
	if m := s.latestMetrics(); m != nil {
		for _, k := range [][]string{
			{"edged_stream_disconnects_total", "reason", "any"}, {"edged_stream_disconnects_total", "reason", "slow"},
			{"edged_stream_rejected_total", "reason", "any"}, {"edged_sink_records_dropped_total", "sink", "local"},
			{"edged_sink_records_dropped_total", "sink", "uart"}, {"edged_serial_reconnects_total", "sink", "uart"},
			{"edged_serial_write_stalls_total", "sink", "uart"}, {"edged_state_writes_total", "result", "ok"},
			{"edged_state_writes_total", "result", "error"}, {"edged_engine_checks_total", "model", "demo"},
			{"edged_source_starts_total", "source", "rec"}, {"edged_sink_connected", "sink", "cloud"},
			{"edged_sink_errors_total", "sink", "cloud"},
		} {
			if v := m.get(k[0], k[1], k[2]); !math.IsNaN(v) {
				sum.Metrics[k[0]+"{"+k[1]+"="+k[2]+"}"] = v
			}
		}
	}
	text := s.summaryText(&sum)
	files := []struct {
		name  string
		write func(string) error
	}{
		{"samples.csv", func(p string) error { return writeCSV(p, s.rows) }},
		{"soak.png", func(p string) error { return writePlot(p, s.rows, checks, &sum) }},
		{"summary.txt", func(p string) error { return os.WriteFile(p, []byte(text), 0o644) }},
		{"summary.json", func(p string) error {
			b, err := json.MarshalIndent(sum, "", "  ")
			if err != nil {
				return err
			}
			return os.WriteFile(p, append(b, '\n'), 0o644)
		}},
	}
	for _, fl := range files {
		if err := fl.write(filepath.Join(s.out, fl.name)); err != nil {
			return false, fmt.Errorf("writing %s: %w", fl.name, err)
		}
	}
	fmt.Print(text)
	return pass, nil
}

func (s *soak) version() string {
	out, err := execOutput(s.o.edged, "version")
	if err != nil {
		return s.o.edged + " (version: " + err.Error() + ")"
	}
	return strings.TrimSpace(out)
}

// logLevels counts the lines of edged's log by level.
func logLevels(path string) map[string]int {
	n := map[string]int{}
	b, err := os.ReadFile(path)
	if err != nil {
		return n
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		n["lines"]++
		for _, l := range []string{"WARN", "ERROR"} {
			if strings.Contains(line, "level="+l) {
				n[l]++
			}
		}
	}
	return n
}

func (s *soak) summaryText(sum *Summary) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	verdict := "PASS"
	if !sum.Pass {
		verdict = "FAIL"
	}
	p("")
	p("edged soak %s: %s", sum.Date, verdict)
	machine := ""
	if sum.Machine != "" {
		machine = ", " + sum.Machine
	}
	p("  %s of churn (%.0f s sampled)%s; %s; camera %s at %g fps; seed %d", sum.Duration, sum.SpanS, machine, sum.Edged, sum.Frame, sum.FPS, sum.Seed)
	if len(sum.Checks) > 0 {
		fw, lw := sum.Checks[0].FirstWindow, sum.Checks[0].LastWindow
		p("flat? medians of t=%.0f-%.0f s (after a %.0f %% warm-up) against t=%.0f-%.0f s:", fw[0], fw[1], sum.Tolerances.Warmup*100, lw[0], lw[1])
	}
	for _, c := range sum.Checks {
		ok := "ok  "
		if !c.OK {
			ok = "FAIL"
		}
		p("  %s %-10s %s", ok, c.Name, c.Detail)
	}
	if tr := sum.TrendPerH; len(tr) == 3 {
		p("trend after the warm-up (least squares, reported, not judged): RSS %+.1f MiB/h, fds %+.1f/h, goroutines %+.1f/h", tr["rss_mib"], tr["fds"], tr["goroutines"])
	}
	if q := sum.Quiet; q[0].Samples > 0 && q[1].Samples > 0 {
		p("quiet, the monitor the only client (reported, not judged): before the churn %.1f MiB, %.0f fds, %.0f goroutines; after it %.1f MiB, %.0f fds, %.0f goroutines",
			q[0].RSSMiB, q[0].FDs, q[0].Goroutines, q[1].RSSMiB, q[1].FDs, q[1].Goroutines)
	}
	c := sum.Counts
	t := sum.Times
	p("results/s: median %.1f, min %.1f, max %.1f over %d samples; monitor client: %d results, %d lost to seq gaps, %d connection(s)",
		sum.ResultsPerS.Median, sum.ResultsPerS.Min, sum.ResultsPerS.Max, sum.ResultsPerS.N, sum.Monitor["results"], sum.Monitor["missed"], sum.Monitor["connects"])
	p("model files renamed in: %d valid, %d installed (write to first result: median %.2f s, max %.2f s); %d junk, %d rejected (median %.2f s)",
		c["model_valid_written"], c["model_valid_installed"], t["install"].Median, t["install"].Max, c["model_junk_written"], c["model_junk_rejected"], t["reject"].Median)
	p("SIGHUP: %d with a rate change (%d config_reloaded), %d unchanged; edged reload: %d ok",
		c["sighup_changed"], c["sighup_reloaded"], c["sighup_unchanged"], c["edged_reload_ok"])
	p("socket clients: %d readers, %d slow readers, %d that never read (edged cut off %.0f slow clients), %d ghosts; %d dial errors",
		c["client_readers"], c["client_slow"], c["client_stalled"], sum.Metrics[`edged_stream_disconnects_total{reason=slow}`], c["client_ghosts"], c["client_dial_errors"])
	p("serial sensor (pty): %d unplugs, %d back with samples in results (median %.2f s, max %.2f s); %d lines written",
		c["sensor_unplugs"], c["sensor_recovered"], t["recover_sensor"].Median, t["recover_sensor"].Max, sum.Serial["imu_lines_written"])
	p("serial sink (pty): %d unplugs, %d back with frames (median %.2f s, max %.2f s); %d records decoded, %d CRC errors, %d frame errors (torn by the unplugs)",
		c["sink_unplugs"], c["sink_recovered"], t["recover_sink"].Median, t["recover_sink"].Max, sum.Serial["uart_records_decoded"], sum.Serial["uart_crc_errors"], sum.Serial["uart_frame_errors"])
	if m := sum.MQTT; m != nil {
		p("mqtt (Mosquitto, QoS 1): broker stopped %d times for %v, edged connected again %d times (median %.2f s, max %.2f s after the broker's return); %d records received, %d distinct, seq %d..%d, %d missing (edged counted %d dropped), %d duplicates (resent, at least once)",
			m.Restarts, s.o.brokerDown, c["broker_reconnected"], t["mqtt_reconnect"].Median, t["mqtt_reconnect"].Max, m.Records, m.Unique, m.FirstSeq, m.LastSeq, m.Gaps, m.Dropped, m.Duplicates)
	} else {
		p("mqtt: not run (-mqtt=false)")
	}
	if sum.Replay {
		p("replay (pipeline rec): recording replaced %d times: %d renamed over, %d written in place, %d in place with another frame size; results back after %d of the %d same-size ones (median %.2f s, max %.2f s); source starts per replacement median %.0f, max %.0f (%v total)",
			c["replay_renamed"]+c["replay_in_place"]+c["replay_other_size"], c["replay_renamed"], c["replay_in_place"], c["replay_other_size"],
			c["replay_resumed"], c["replay_renamed"]+c["replay_in_place"], t["replay_resume"].Median, t["replay_resume"].Max,
			t["replay_restarts"].Median, t["replay_restarts"].Max, sum.Metrics["edged_source_starts_total{source=rec}"])
	} else {
		p("replay: not run (-replay=false)")
	}
	var ev []string
	for k, v := range sum.Events {
		ev = append(ev, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(ev)
	p("status events seen: %s", strings.Join(ev, ", "))
	p("edged log: %d lines, %d WARN, %d ERROR; stopped by SIGTERM: exit %d in %.2f s", sum.LogLines["lines"], sum.LogLines["WARN"], sum.LogLines["ERROR"], sum.ExitCode, sum.StopS)
	if len(sum.Problems) == 0 {
		p("problems: none")
	} else {
		p("problems (%d):", len(sum.Problems))
		for _, pr := range sum.Problems {
			p("  - %s", pr)
		}
	}
	for _, n := range sum.Notes {
		p("  note: %s", n)
	}
	p("report: %s (summary.txt, summary.json, samples.csv, soak.png, edged.log, edged.toml)", s.out)
	return b.String()
}

var (
	colLine  = color.RGBA{31, 119, 180, 255}
	colWarm  = color.RGBA{242, 242, 242, 255}
	colWin   = color.RGBA{222, 235, 247, 255}
	colLimit = color.RGBA{214, 39, 40, 255}
	colMed   = color.RGBA{44, 160, 44, 255}
)

// writePlot draws RSS, open fds, goroutines and results/s over time, one
// panel each, with the warm-up greyed, the compared windows shaded, the
// first window's median (green, dashed), the largest median that passes
// (red, dashed) and the last window's median (green, solid).
func writePlot(path string, rows []Row, checks []Check, sum *Summary) error {
	const W, panelH = 1200, 250
	panels := []struct {
		title, unit string
		get         func(Row) float64
		check       string
	}{
		{"RSS (VmRSS)", "MiB", func(r Row) float64 { return r.RSSMiB }, "rss"},
		{"open file descriptors (/proc/PID/fd)", "fds", func(r Row) float64 { return r.FDs }, "fds"},
		{"goroutines (edged_goroutines)", "count", func(r Row) float64 { return r.Goroutines }, "goroutines"},
		{"results per second, as a client received them (stalls: edged_results_total)", "1/s", func(r Row) float64 { return r.ResultsPerS }, "results"},
	}
	H := 70 + len(panels)*panelH + 30
	img := plot.New(W, H)
	verdict := "PASS"
	if !sum.Pass {
		verdict = fmt.Sprintf("FAIL (%d problems)", len(sum.Problems))
	}
	img.Text(W/2, 30, fmt.Sprintf("edged soak: %s, %s", sum.Duration, verdict), plot.Black, 2, 0)
	sub := fmt.Sprintf("%s | %s | %s at %g fps | %s", sum.Date, sum.Edged, sum.Frame, sum.FPS, sum.Machine)
	img.Text(W/2, 52, sub, plot.Grey, 1, 0)
	span := 1.0
	if len(rows) > 0 {
		span = math.Max(rows[len(rows)-1].T-rows[0].T, 1)
	}
	t0 := 0.0
	if len(rows) > 0 {
		t0 = rows[0].T
	}
	_, xStep := plot.NiceMax(span)
	// The judged windows count from the first sample of the churn.
	base, end := t0, math.NaN()
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Phase == phaseChurn {
			base = rows[i].T
			if math.IsNaN(end) {
				end = rows[i].T
			}
		}
	}
	for i, pn := range panels {
		var ck *Check
		for j := range checks {
			if checks[j].Name == pn.check {
				ck = &checks[j]
			}
		}
		vmax := 0.0
		for _, r := range rows {
			if v := pn.get(r); !math.IsNaN(v) {
				vmax = math.Max(vmax, v)
			}
		}
		title := pn.title
		if ck != nil && pn.check != "results" && !math.IsNaN(ck.First) {
			vmax = math.Max(vmax, ck.First+ck.Allowed)
			ok := "ok"
			if !ck.OK {
				ok = "FAIL"
			}
			title += fmt.Sprintf(": median %s -> %s (%+.4g, allowed %+.4g) %s", fmtV(ck.First), fmtV(ck.Last), ck.Growth, ck.Allowed, ok)
		} else if ck != nil {
			title += fmt.Sprintf(": longest stall %.1f s (allowed %.0f s)", ck.Growth, ck.Allowed)
		}
		top, step := plot.NiceMax(vmax * 1.05)
		y0 := 70 + i*panelH
		area, ppu := img.Panel(10, y0, W-10, y0+panelH, title, pn.unit, top, step)
		x := func(t float64) int { return area.Min.X + int(math.Round((t-t0)/span*float64(area.Dx()))) }
		y := func(v float64) int { return area.Max.Y - int(math.Round(v*ppu)) }
		if ck != nil {
			img.Rect(x(base), area.Min.Y, x(base+ck.FirstWindow[0]), area.Max.Y, colWarm)
			img.Rect(x(base+ck.FirstWindow[0]), area.Min.Y, x(base+ck.FirstWindow[1]), area.Max.Y, colWin)
			img.Rect(x(base+ck.LastWindow[0]), area.Min.Y, x(base+ck.LastWindow[1]), area.Max.Y, colWin)
		}
		// The grid again, over the shading.
		for v := 0.0; v <= top+step/2; v += step {
			gy := y(v)
			for gx := area.Min.X + 1; gx < area.Max.X; gx += 4 {
				img.Set(gx, gy, plot.Grid)
			}
		}
		// Time axis.
		for t := 0.0; t <= span+xStep/2; t += xStep {
			tx := x(t0 + t)
			img.Rect(tx, area.Max.Y, tx+1, area.Max.Y+4, plot.Grey)
			img.Text(tx, area.Max.Y+16, fmtSeconds(t), plot.Grey, 1, 0)
		}
		if i == 0 {
			img.Text(x(base), area.Min.Y+14, " churn from here", plot.Grey, 1, -1)
		}
		img.Rect(x(base), area.Min.Y, x(base)+1, area.Max.Y, plot.Grey)
		if !math.IsNaN(end) && end < rows[len(rows)-1].T {
			img.Rect(x(end), area.Min.Y, x(end)+1, area.Max.Y, plot.Grey)
		}
		if i == len(panels)-1 {
			img.Text(area.Max.X, area.Max.Y+32, "time since edged was ready", plot.Grey, 1, 1)
		}
		// The series.
		havePrev := false
		var px, py int
		for _, r := range rows {
			v := pn.get(r)
			if math.IsNaN(v) {
				havePrev = false
				continue
			}
			cx, cy := x(r.T), y(v)
			if havePrev {
				img.Line(px, py, cx, cy, colLine)
			} else {
				img.Set(cx, cy, colLine)
			}
			px, py, havePrev = cx, cy, true
		}
		if ck != nil && pn.check != "results" && !math.IsNaN(ck.First) {
			img.DashedH(x(base+ck.FirstWindow[0]), area.Max.X, y(ck.First), colMed)
			img.DashedH(x(base+ck.FirstWindow[0]), area.Max.X, y(ck.First+ck.Allowed), colLimit)
			img.Rect(x(base+ck.LastWindow[0]), y(ck.Last), x(base+ck.LastWindow[1]), y(ck.Last)+2, colMed)
		}
	}
	ly := H - 14
	lx := 20
	for _, l := range []struct {
		c    color.RGBA
		text string
	}{{colLine, "sampled every second"}, {colWarm, "warm-up"}, {colWin, "compared windows"}, {colMed, "window medians"}, {colLimit, "largest last median that passes"}} {
		img.Rect(lx, ly-10, lx+14, ly+2, l.c)
		img.Text(lx+20, ly, l.text, plot.Black, 1, -1)
		lx += 40 + 7*len(l.text)
	}
	return img.SavePNG(path)
}

func fmtSeconds(t float64) string {
	if t >= 120 && math.Mod(t, 60) == 0 {
		return fmt.Sprintf("%.0fm", t/60)
	}
	return fmt.Sprintf("%.0fs", t)
}
