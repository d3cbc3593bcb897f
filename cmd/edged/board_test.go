package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/board/boardtest"
	"github.com/edged-dev/edged/runtime/stream"
)

// boardConfig is metricsConfig reading the board from tree.
func boardConfig(t *testing.T, dir string, tree *boardtest.Tree) (cfgPath, sock, metrics string) {
	t.Helper()
	return metricsConfig(t, dir,
		`sysfs = "/sys"`, `sysfs = "`+tree.Paths.Sys+`"`,
		`procfs = "/proc"`, `procfs = "`+tree.Paths.Proc+`"`,
		`rootfs = "/"`, `rootfs = "`+tree.Paths.Root+`"`)
}

// documentedSeries reads every metric table of docs/OPERATIONS.md: each
// name of a row's first column with the label names of its third (what is
// in parentheses there are values). board is the names of the table under
// "### Board metrics".
func documentedSeries(t *testing.T) (labels map[string][]string, board []string) {
	t.Helper()
	text, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`(edged_[a-z0-9_]+)`")
	label := regexp.MustCompile("`([a-z_][a-z0-9_]*)`")
	parens := regexp.MustCompile(`\([^()]*\)`)
	labels = map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "#") {
			section = line
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 5 || !strings.HasPrefix(strings.TrimSpace(cols[1]), "`edged_") {
			continue
		}
		lc := cols[3]
		for prev := ""; prev != lc; {
			prev, lc = lc, parens.ReplaceAllString(lc, "")
		}
		var ls []string
		for _, m := range label.FindAllStringSubmatch(lc, -1) {
			ls = append(ls, m[1])
		}
		slices.Sort(ls)
		for _, m := range name.FindAllStringSubmatch(cols[1], -1) {
			labels[m[1]] = ls
			if section == "### Board metrics" {
				board = append(board, m[1])
			}
		}
	}
	if len(labels) < 30 || len(board) != 8 {
		t.Fatalf("docs/OPERATIONS.md: %d metrics, %d of the board: %v", len(labels), len(board), board)
	}
	return labels, board
}

// TestBoardOfTheBinary runs the real binary on an Orin Nano's fake tree
// (JetPack 6) in which cv0-thermal's temperature cannot be read and
// soc0-thermal's is garbage. Its /metrics has every series of the board's
// table in docs/OPERATIONS.md, every edged series it has is in one of the
// tables with the labels written there, and promtool passes it. Each bad
// file is one log line, whatever the number of read cycles, and leaves out
// its series only. gpu-thermal heating past its passive trip point is a
// thermal_throttle record and shows in STATUS=; nvpmodel -m 2 is
// power_mode_changed and the new mode in /metrics; cooling is thermal_ok;
// rails that go away leave /metrics.
func TestBoardOfTheBinary(t *testing.T) {
	lib := needORT(t)
	tree := boardtest.Copy(t, boardtest.OrinJP6)
	tree.Unreadable("sys/class/thermal/thermal_zone2/temp")   // cv0-thermal
	tree.Write("sys/class/thermal/thermal_zone5/temp", "hot") // soc0-thermal
	tree.Write("proc/pressure/memory", "some avg10=1.50 avg60=0.20 avg300=0.05 total=1234\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0")
	cfg, sock, metrics := boardConfig(t, t.TempDir(), tree)
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path)
	recs := readRecords(t, sock)
	at := recs.wait(t, "a result", 0, func(r stream.Decoded) bool { return r.Type == "result" })

	text, _, err := getMetrics(metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := scrapeFamilies(metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	documented, boardSeries := documentedSeries(t)
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "edged_") {
			continue
		}
		want, ok := documented[name]
		if !ok {
			t.Errorf("%s is in /metrics, not in docs/OPERATIONS.md", name)
			continue
		}
		for _, m := range mf.Metric {
			var got []string
			for _, l := range m.Label {
				got = append(got, l.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s has labels %v, docs/OPERATIONS.md says %v", name, got, want)
				break
			}
		}
	}
	for _, name := range boardSeries {
		if mfs[name] == nil {
			t.Errorf("%s is in docs/OPERATIONS.md, not in the /metrics of an Orin", name)
		}
	}
	for series, want := range map[string]float64{
		`edged_thermal_zone_celsius{zone="gpu-thermal"}`:  46.031,
		`edged_thermal_zone_celsius{zone="tj-thermal"}`:   47.312,
		`edged_gpu_load_ratio`:                            0.123,
		`edged_frequency_hertz{unit="gpu"}`:               306e6,
		`edged_frequency_max_hertz{unit="gpu"}`:           1020e6,
		`edged_frequency_hertz{unit="emc"}`:               665.6e6,
		`edged_frequency_max_hertz{unit="cpu_policy4"}`:   1728e6,
		`edged_power_mode{mode="0",name="15W"}`:           1,
		`edged_power_mode{mode="2",name="MAXN_SUPER"}`:    0,
		`edged_power_watts{rail="VDD_IN"}`:                3.580832,
		`edged_power_watts{rail="VDD_SOC"}`:               1.44324,
		`edged_memory_available_bytes`:                    4734512 << 10,
		`edged_memory_pressure_ratio`:                     0.015,
		`edged_thermal_zone_celsius{zone="soc0-thermal"}`: -1, // garbage: not exported
		`edged_thermal_zone_celsius{zone="cv0-thermal"}`:  -1, // unreadable: not exported
		`edged_thermal_zone_celsius{zone="cv1-thermal"}`:  -1, // no temp file: not exported
		`edged_power_watts{rail="sum of shunt voltages"}`: -1,
	} {
		got, err := sampleValue(mfs, series) // -1: no such series
		if want == -1 {
			if got != -1 || err != nil {
				t.Errorf("%s = %v (%v), want no such series", series, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s = %v (%v), want %v", series, got, err, want)
		}
	}
	promtool(t, text)

	tree.SetTemp(1, 100) // gpu-thermal, passive trip point 99 °C
	at = recs.wait(t, "thermal_throttle", at, func(r stream.Decoded) bool {
		return r.Event == "thermal_throttle" && r.Source == "gpu-thermal" && strings.Contains(r.Reason, "gpu-thermal at 100.0 °C")
	})
	n.waitFor(t, "the throttling in STATUS=", 20*time.Second, func(m []string) bool {
		return slices.ContainsFunc(m, func(s string) bool {
			return strings.HasPrefix(s, "STATUS=") && strings.HasSuffix(s, "; board: power mode 15W, gpu-thermal throttling at 100.0 °C")
		})
	})
	tree.SetPowerMode(2)
	at = recs.wait(t, "power_mode_changed", at, func(r stream.Decoded) bool {
		return r.Event == "power_mode_changed" && r.Source == "MAXN_SUPER" && r.Reason == "power mode MAXN_SUPER (mode 2), was 15W (mode 0)"
	})
	if v := scrape(t, metrics, `edged_power_mode{mode="2",name="MAXN_SUPER"}`); v != 1 {
		t.Errorf("the new power mode is %v in /metrics", v)
	}
	tree.SetTemp(1, 90)
	recs.wait(t, "thermal_ok", at, func(r stream.Decoded) bool { return r.Event == "thermal_ok" && r.Source == "gpu-thermal" })
	tree.Remove("sys/bus/i2c/drivers/ina3221")
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, metrics, `edged_power_watts{rail="VDD_IN"}`) != -1 {
		if time.Now().After(deadline) {
			t.Fatal("the rails stayed in /metrics after their files went")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	log := d.stderr.String()
	for _, file := range []string{"thermal_zone2/temp", "thermal_zone5/temp"} {
		lines := 0
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "board: file not usable; its series is not exported") && strings.Contains(l, file) {
				lines++
			}
		}
		if lines != 1 {
			t.Errorf("%s: %d log lines, want 1:\n%s", file, lines, log)
		}
	}
	if !strings.Contains(log, "board: a thermal zone reached its passive trip point") || strings.Contains(log, "panic") {
		t.Errorf("log:\n%s", log)
	}
}

// TestCheckShowsTheBoard: edged check reads the board where run would and
// says the power mode, the zone that throttles (a warning), the others,
// the clocks, the rails, memory and the file it cannot read, without
// changing its verdict.
func TestCheckShowsTheBoard(t *testing.T) {
	lib := needORT(t)
	tree := boardtest.Copy(t, boardtest.OrinJP6)
	tree.SetTemp(1, 100.5)
	tree.Unreadable("sys/class/thermal/thermal_zone2/temp")
	cfg, _, _ := boardConfig(t, t.TempDir(), tree)
	cmd := edged("check", "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	_, section, _ := strings.Cut(string(out), "board:\n")
	section, _, _ = strings.Cut(section, "preprocessing:\n")
	for _, want := range []string{
		"  ok    power mode 15W (mode 0)\n",
		"  warn  gpu-thermal at 100.5 °C: at or above its first passive trip point (99.0 °C), the kernel slows the clocks\n",
		"  ok    thermal zones: cpu-thermal 47.3 °C, soc0-thermal 46.1 °C, soc1-thermal 46.3 °C, soc2-thermal 44.8 °C, tj-thermal 47.3 °C\n",
		"  ok    GPU load 12 %, gpu 306 of 1020 MHz, emc 666 of 3199 MHz, cpu_policy0 730 of 1728 MHz, cpu_policy4 730 of 1728 MHz\n",
		"  ok    power rails: VDD_CPU_GPU_CV 5.06 V × 0.142 A = 0.72 W, VDD_IN 5.07 V × 0.706 A = 3.58 W, VDD_SOC 5.06 V × 0.285 A = 1.44 W\n",
		"  ok    memory: MemAvailable 4.5 of 7.3 GiB\n",
		"thermal_zone2/temp (cv0-thermal temperature): board: unreadable: is a directory (not exported)\n",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("check's board section lacks %q:\n%s", want, section)
		}
	}
	if !strings.HasSuffix(string(out), "runnable\n") {
		t.Errorf("a hot board changed the verdict:\n%s", out)
	}
}
