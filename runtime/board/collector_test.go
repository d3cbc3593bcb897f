package board

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/edged-dev/edged/runtime/board/boardtest"
)

// TestCollectorOfAnOrin: the series of an Orin Nano with JetPack 6, as a
// scrape shows them: every readable zone by its type, the GPU's load,
// the frequencies and their maxima by unit, every power mode with the
// active one at 1, each rail's power, MemAvailable. The cv zones, whose
// temperature cannot be read, and PSI, which the board does not have, are
// not there.
func TestCollectorOfAnOrin(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	m := New(Options{Paths: Paths(tr.Paths), Interval: time.Hour})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	if text := gatherText(t, reg); len(text) != 0 {
		t.Errorf("before Start:\n%s", text)
	}
	m.Start()
	defer m.Close()
	want := `
# HELP edged_frequency_hertz Clock frequency of the GPU, the EMC and each CPU cluster (cpufreq policy).
# TYPE edged_frequency_hertz gauge
edged_frequency_hertz{unit="cpu_policy0"} 7.296e+08
edged_frequency_hertz{unit="cpu_policy4"} 7.296e+08
edged_frequency_hertz{unit="emc"} 6.656e+08
edged_frequency_hertz{unit="gpu"} 3.06e+08
# HELP edged_frequency_max_hertz Highest frequency each clock may run at now: the power mode's cap, lowered while a zone throttles.
# TYPE edged_frequency_max_hertz gauge
edged_frequency_max_hertz{unit="cpu_policy0"} 1.728e+09
edged_frequency_max_hertz{unit="cpu_policy4"} 1.728e+09
edged_frequency_max_hertz{unit="emc"} 3.199e+09
edged_frequency_max_hertz{unit="gpu"} 1.02e+09
# HELP edged_gpu_load_ratio GPU busy share, 0 to 1 (nvgpu's load, read every few seconds).
# TYPE edged_gpu_load_ratio gauge
edged_gpu_load_ratio 0.123
# HELP edged_memory_available_bytes MemAvailable of procfs's meminfo, read every few seconds (on a Jetson also the GPU's memory).
# TYPE edged_memory_available_bytes gauge
edged_memory_available_bytes 4.848140288e+09
# HELP edged_power_mode nvpmodel's power modes: 1 for the active one, 0 for the others its configuration defines.
# TYPE edged_power_mode gauge
edged_power_mode{mode="0",name="15W"} 1
edged_power_mode{mode="1",name="25W"} 0
edged_power_mode{mode="2",name="MAXN_SUPER"} 0
edged_power_mode{mode="3",name="7W"} 0
# HELP edged_power_watts Power of each INA3221 rail (bus voltage times current).
# TYPE edged_power_watts gauge
edged_power_watts{rail="VDD_CPU_GPU_CV"} 0.719088
edged_power_watts{rail="VDD_IN"} 3.580832
edged_power_watts{rail="VDD_SOC"} 1.44324
# HELP edged_thermal_zone_celsius Temperature of each thermal zone (class/thermal/thermal_zoneN/temp), by the zone's type.
# TYPE edged_thermal_zone_celsius gauge
edged_thermal_zone_celsius{zone="cpu-thermal"} 47.312
edged_thermal_zone_celsius{zone="gpu-thermal"} 46.031
edged_thermal_zone_celsius{zone="soc0-thermal"} 46.093
edged_thermal_zone_celsius{zone="soc1-thermal"} 46.281
edged_thermal_zone_celsius{zone="soc2-thermal"} 44.843
edged_thermal_zone_celsius{zone="tj-thermal"} 47.312
`
	if got := string(gatherText(t, reg)); got != strings.TrimPrefix(want, "\n") {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
	for _, name := range boardtest.Boards {
		t.Run("promtool/"+name, func(t *testing.T) {
			m := New(Options{Paths: Paths(boardtest.Copy(t, name).Paths), Interval: time.Hour})
			m.Start()
			defer m.Close()
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(m.Collector())
			promtool(t, gatherText(t, reg))
		})
	}
}

// TestCollectorUniqueSeries: two zones of one type (an x86 host's acpitz)
// and two rails of one name are separate series, so a scrape never fails
// with a duplicate.
func TestCollectorUniqueSeries(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.X86)
	for _, chip := range []string{"1-0040", "1-0041"} {
		tr.Write("sys/bus/i2c/drivers/ina3221/"+chip+"/hwmon/hwmon0/in1_label", "VDD_IN")
		tr.Write("sys/bus/i2c/drivers/ina3221/"+chip+"/hwmon/hwmon0/in1_input", "5000")
		tr.Write("sys/bus/i2c/drivers/ina3221/"+chip+"/hwmon/hwmon0/curr1_input", "100")
	}
	m := New(Options{Paths: Paths(tr.Paths), Interval: time.Hour})
	m.Start()
	defer m.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	text := string(gatherText(t, reg))
	for _, s := range []string{`{zone="acpitz"}`, `{zone="acpitz@thermal_zone1"}`, `{rail="VDD_IN"}`, `{rail="VDD_IN@1-0041"}`, "edged_memory_pressure_ratio 0\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("no %s in:\n%s", s, text)
		}
	}
}

func gatherText(t testing.TB, reg prometheus.Gatherer) []byte {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// promtool runs `promtool check metrics` (its parser and lint) on a
// scrape; without promtool it skips, unless EDGED_REQUIRE_PROMTOOL is set.
func promtool(t *testing.T, scrape []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_PROMTOOL") != "" {
			t.Fatalf("EDGED_REQUIRE_PROMTOOL is set: %v", err)
		}
		t.Skipf("promtool is not installed (Debian: apt-get install prometheus): %v", err)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out, scrape)
	}
}
