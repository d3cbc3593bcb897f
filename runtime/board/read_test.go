package board

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/edged-dev/edged/runtime/board/boardtest"
)

// describe renders a snapshot as one line per reading, for comparing
// with what a board's tree holds.
func describe(s Snapshot) []string {
	var out []string
	for _, z := range s.Zones {
		line := "zone " + z.Name
		if z.HasTemp {
			line += fmt.Sprintf(" %.3f", z.Celsius)
		} else {
			line += " -"
		}
		if p, ok := z.Passive(); ok {
			line += fmt.Sprintf(" passive %g", p)
		}
		out = append(out, line)
	}
	if s.HasGPULoad {
		out = append(out, fmt.Sprintf("gpu load %.3f", s.GPULoad))
	}
	for _, f := range s.Freqs {
		line := "freq " + f.Unit
		if f.HasHz {
			line += fmt.Sprintf(" %g", f.Hz)
		} else {
			line += " -"
		}
		if f.HasMax {
			line += fmt.Sprintf(" max %g", f.Max)
		}
		out = append(out, line)
	}
	if m := s.Mode; m.Known {
		var names []string
		for _, x := range m.Modes {
			names = append(names, fmt.Sprintf("%d=%s", x.ID, x.Name))
		}
		out = append(out, fmt.Sprintf("mode %d %s of %s", m.ID, m.Name, strings.Join(names, ",")))
	}
	for _, r := range s.Rails {
		out = append(out, fmt.Sprintf("rail %s %.3f V %.3f A %.3f W", r.Name, r.Volts, r.Amps, r.Watts))
	}
	if m := s.Memory; m.HasMeminfo {
		out = append(out, fmt.Sprintf("memory %d of %d", m.Available, m.Total))
	}
	if m := s.Memory; m.HasPressure {
		out = append(out, fmt.Sprintf("pressure %.4f", m.Pressure))
	}
	return out
}

func reader(tr *boardtest.Tree) *Reader { return NewReader(Paths(tr.Paths)) }

// TestReadBoards reads the tree of each board as docs/OPERATIONS.md lays
// it out: an Orin with JetPack 5 and with JetPack 6, a Xavier and an x86
// host; every reading is there, with its unit converted, and nothing is a
// problem. What a board lacks (an x86 host's rails, GPU and power mode) is
// simply absent.
func TestReadBoards(t *testing.T) {
	orinTrips := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, n)
		}
		return out
	}
	want := map[string][]string{
		boardtest.OrinJP6: orinTrips(
			"zone cpu-thermal 47.312 passive 99", "zone gpu-thermal 46.031 passive 99",
			"zone cv0-thermal - passive 99", "zone cv1-thermal - passive 99", "zone cv2-thermal - passive 99",
			"zone soc0-thermal 46.093 passive 99", "zone soc1-thermal 46.281 passive 99", "zone soc2-thermal 44.843 passive 99",
			"zone tj-thermal 47.312 passive 99",
			"gpu load 0.123",
			"freq gpu 3.06e+08 max 1.02e+09", "freq emc 6.656e+08 max 3.199e+09",
			"freq cpu_policy0 7.296e+08 max 1.728e+09", "freq cpu_policy4 7.296e+08 max 1.728e+09",
			"mode 0 15W of 0=15W,1=25W,2=MAXN_SUPER,3=7W",
			"rail VDD_CPU_GPU_CV 5.064 V 0.142 A 0.719 W", "rail VDD_IN 5.072 V 0.706 A 3.581 W", "rail VDD_SOC 5.064 V 0.285 A 1.443 W",
			"memory 4848140288 of 7803158528"),
		boardtest.OrinJP5: {
			"zone CPU-therm 51.250 passive 99", "zone GPU-therm 49.875 passive 99",
			"zone CV0-therm 48.000 passive 99", "zone CV1-therm 47.500 passive 99", "zone CV2-therm 47.750 passive 99",
			"zone SOC0-therm 48.375 passive 99", "zone SOC1-therm 48.625 passive 99", "zone SOC2-therm 47.125 passive 99",
			"zone tj-therm 51.250 passive 99",
			"gpu load 0.874",
			"freq gpu 1.3005e+09 max 1.3005e+09", "freq emc 3.199e+09 max 3.199e+09",
			"freq cpu_policy0 2.2016e+09 max 2.2016e+09", "freq cpu_policy4 2.2016e+09 max 2.2016e+09", "freq cpu_policy8 2.2016e+09 max 2.2016e+09",
			"mode 0 MAXN of 0=MAXN,1=MODE_15W,2=MODE_30W,3=MODE_50W",
			"rail VDDQ_VDD2_1V8AO 4.992 V 0.509 A 2.541 W", "rail VDD_CPU_CV 19.040 V 0.163 A 3.104 W",
			"rail VDD_GPU_SOC 19.040 V 0.711 A 13.537 W", "rail VIN_SYS_5V0 4.984 V 1.539 A 7.670 W",
			"memory 59413721088 of 65879896064"},
		boardtest.XavierJP5: {
			"zone CPU-therm 42.500 passive 95.5", "zone GPU-therm 41.000 passive 95.5", "zone AUX-therm 40.500 passive 95.5",
			"zone AO-therm 41.500", "zone PMIC-Die 100.000", "zone Tboard_tegra 39.000", "zone Tdiode_tegra 40.250", "zone thermal-fan-est 41.800",
			"gpu load 0.000",
			"freq gpu 3.1875e+08 max 1.377e+09", "freq emc 2.133e+09 max 2.133e+09",
			"freq cpu_policy0 1.1904e+09 max 2.2656e+09", "freq cpu_policy2 1.1904e+09 max 2.2656e+09",
			"freq cpu_policy4 1.1904e+09 max 2.2656e+09", "freq cpu_policy6 1.1904e+09 max 2.2656e+09",
			"mode 0 MAXN of 0=MAXN,1=MODE_10W,2=MODE_15W,3=MODE_30W_ALL",
			"rail CPU 19.136 V 0.152 A 2.909 W", "rail CV 19.152 V 0.000 A 0.000 W", "rail GPU 19.136 V 0.000 A 0.000 W",
			"rail SOC 19.136 V 0.704 A 13.472 W", "rail SYS5V 4.976 V 1.066 A 5.304 W", "rail VDDRQ 19.152 V 0.136 A 2.605 W",
			"memory 29913518080 of 33266888704"},
		boardtest.X86: {
			// Two zones of one type are told apart; x86_pkg_temp's passive
			// trip point reads 0 (never set) and is no trip point.
			"zone acpitz 27.800", "zone acpitz@thermal_zone1 29.800", "zone x86_pkg_temp 45.000",
			"freq cpu_policy0 2.4e+09 max 4.2e+09", "freq cpu_policy1 2.4e+09 max 4.2e+09",
			"freq cpu_policy2 2.4e+09 max 4.2e+09", "freq cpu_policy3 2.4e+09 max 4.2e+09",
			"memory 21916889088 of 33567125504", "pressure 0.0000"},
	}
	for _, name := range boardtest.Boards {
		t.Run(name, func(t *testing.T) {
			s, problems := reader(boardtest.Copy(t, name)).Read()
			if len(problems) > 0 {
				t.Errorf("problems reading a well-formed tree: %v", problems)
			}
			if got := describe(s); !slices.Equal(got, want[name]) {
				t.Errorf("read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want[name], "\n"))
			}
		})
	}
}

// TestReadEmptyHost: a machine without any of the files (the dev VM has
// no zones, no cpufreq, no GPU) reads as an empty snapshot, not problems;
// a root that does not exist at all neither.
func TestReadEmptyHost(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []Paths{{Sys: dir, Proc: dir, Root: dir}, {Sys: filepath.Join(dir, "none"), Proc: filepath.Join(dir, "none"), Root: filepath.Join(dir, "none")}} {
		s, problems := NewReader(p).Read()
		if len(problems) > 0 || len(describe(s)) > 0 {
			t.Errorf("%+v: %v, problems %v", p, describe(s), problems)
		}
	}
}

// faultFS wraps a tree and fails the reads of some files with an errno,
// as the kernel does (EAGAIN from an Orin's cv zones, EACCES from debugfs
// for a user other than root, where root bypasses modes in a test).
type faultFS struct {
	fs.FS
	fail map[string]error
}

func (f faultFS) Open(name string) (fs.File, error) {
	if err, bad := f.fail[name]; bad {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f.FS.Open(name)
}

func (f faultFS) ReadLink(name string) (string, error) {
	if rl, isRL := f.FS.(fs.ReadLinkFS); isRL {
		return rl.ReadLink(name)
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
}

// TestUnreadableAndGarbage: files that cannot be read and values that do
// not parse are each one problem naming the file, what it holds and why,
// and their series only are missing; everything else is read as before.
func TestUnreadableAndGarbage(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	for z := 2; z <= 4; z++ {
		tr.SetTemp(z, 40) // present, but the board answers EAGAIN
	}
	tr.Write("sys/class/thermal/thermal_zone1/temp", "hot")     // gpu-thermal: garbage
	tr.Write("sys/class/thermal/thermal_zone5/temp", "-300000") // soc0-thermal: below absolute zero
	tr.Write("sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input", "7O6")
	tr.Write("root/var/lib/nvpmodel/status", "pmode:fast")
	tr.Write("sys/class/devfreq/17000000.gpu/cur_freq", "-1")
	tr.Unreadable("sys/devices/platform/gpu.0/load")
	r := reader(tr)
	r.sys = faultFS{r.sys, map[string]error{
		"class/thermal/thermal_zone2/temp":              syscall.EAGAIN,
		"class/thermal/thermal_zone3/temp":              syscall.EAGAIN,
		"class/thermal/thermal_zone4/temp":              syscall.EAGAIN,
		"kernel/debug/bpmp/debug/clk/emc/rate":          syscall.EACCES,
		"kernel/debug/bpmp/debug/clk/emc/max_rate":      syscall.EACCES,
		"class/thermal/thermal_zone8/trip_point_1_type": syscall.EIO,
	}}
	s, problems := r.Read()

	wantProblems := map[string]struct {
		kind error
		says string
	}{
		"sys/class/thermal/thermal_zone1/temp":                        {ErrGarbage, `gpu-thermal temperature): board: unexpected content: "hot"`},
		"sys/class/thermal/thermal_zone2/temp":                        {ErrUnreadable, "resource temporarily unavailable (the sensor gives no reading)"},
		"sys/class/thermal/thermal_zone3/temp":                        {ErrUnreadable, "cv1-thermal temperature"},
		"sys/class/thermal/thermal_zone4/temp":                        {ErrUnreadable, "cv2-thermal temperature"},
		"sys/class/thermal/thermal_zone5/temp":                        {ErrGarbage, `"-300000"`},
		"sys/class/thermal/thermal_zone8/trip_point_1_type":           {ErrUnreadable, "tj-thermal trip point 1"},
		"sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input": {ErrGarbage, `VDD_IN current): board: unexpected content: "7O6"`},
		"root/var/lib/nvpmodel/status":                                {ErrGarbage, `"pmode:fast"`},
		"sys/class/devfreq/17000000.gpu/cur_freq":                     {ErrGarbage, `GPU frequency`},
		"sys/devices/platform/gpu.0/load":                             {ErrUnreadable, "is a directory"},
		"sys/kernel/debug/bpmp/debug/clk/emc/rate":                    {ErrUnreadable, "permission denied (debugfs is readable by root only)"},
		"sys/kernel/debug/bpmp/debug/clk/emc/max_rate":                {ErrUnreadable, "EMC maximum frequency"},
	}
	seen := map[string]bool{}
	for _, p := range problems {
		rel, _ := filepath.Rel(tr.Dir, p.Path)
		w, expected := wantProblems[rel]
		if !expected {
			t.Errorf("unexpected problem %v", p)
			continue
		}
		seen[rel] = true
		if !errors.Is(p, w.kind) || !strings.Contains(p.Error(), w.says) || !strings.HasPrefix(p.Error(), p.Path) {
			t.Errorf("%s: %q, want %v saying %q", rel, p.Error(), w.kind, w.says)
		}
	}
	for rel := range wantProblems {
		if !seen[rel] {
			t.Errorf("no problem reported for %s", rel)
		}
	}
	got := describe(s)
	want := []string{
		"zone cpu-thermal 47.312 passive 99", "zone gpu-thermal - passive 99",
		"zone cv0-thermal - passive 99", "zone cv1-thermal - passive 99", "zone cv2-thermal - passive 99",
		"zone soc0-thermal - passive 99", "zone soc1-thermal 46.281 passive 99", "zone soc2-thermal 44.843 passive 99",
		"zone tj-thermal 47.312",  // its passive trip point 1 is unreadable and skipped; trip point 0 is critical
		"freq gpu - max 1.02e+09", // no load: its file is unreadable; the EMC is root's alone, and its cap 0 is no cap
		"freq cpu_policy0 7.296e+08 max 1.728e+09", "freq cpu_policy4 7.296e+08 max 1.728e+09",
		"rail VDD_CPU_GPU_CV 5.064 V 0.142 A 0.719 W", "rail VDD_SOC 5.064 V 0.285 A 1.443 W",
		"memory 4848140288 of 7803158528",
	}
	if !slices.Equal(got, want) {
		t.Errorf("read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tj := s.Zones[8]; len(tj.Trips) != 1 || tj.Trips[0].Type != "critical" {
		t.Errorf("tj-thermal trips %+v, want the critical one alone", tj.Trips)
	}
}

// TestEMCCap: nvpmodel's EMC cap lowers the maximum when it is below the
// clock's own; without the clock's files (not root), the cap is the
// maximum.
func TestEMCCap(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	tr.Write("sys/kernel/nvpmodel_emc_cap/emc_iso_cap", "2133000000")
	s, _ := reader(tr).Read()
	if f := s.Freqs[1]; f.Unit != "emc" || f.Max != 2133e6 || f.Hz != 665.6e6 {
		t.Errorf("with a cap: %+v", f)
	}
	tr.Remove("sys/kernel/debug")
	s, _ = reader(tr).Read()
	if f := s.Freqs[1]; f.Unit != "emc" || f.HasHz || f.Max != 2133e6 {
		t.Errorf("the cap alone: %+v", f)
	}
}

// TestGPUFound: the GPU is the devfreq device whose node name is a Jetson
// GPU's; other devfreq devices (video engines) are not it, and a GPU
// without its gpu.0 link gives its load through the devfreq device's
// parent.
func TestGPUFound(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.XavierJP5)
	tr.Write("sys/class/devfreq/15340000.vic/cur_freq", "115200000")
	tr.Write("sys/class/devfreq/15340000.vic/max_freq", "1036800000")
	s, problems := reader(tr).Read()
	if len(problems) > 0 || s.Freqs[0].Unit != "gpu" || s.Freqs[0].Hz != 318.75e6 || len(s.Freqs) != 6 {
		t.Errorf("freqs %+v, problems %v", s.Freqs, problems)
	}
	tr.Remove("sys/devices/gpu.0")
	tr.Write("sys/class/devfreq/17000000.gv11b/device/load", "500")
	s, _ = reader(tr).Read()
	if !s.HasGPULoad || s.GPULoad != 0.5 {
		t.Errorf("load through the devfreq device: %v %v", s.HasGPULoad, s.GPULoad)
	}
	tr.Write("sys/class/devfreq/17000000.gv11b/device/load", "1001")
	if s, problems := reader(tr).Read(); s.HasGPULoad || len(problems) != 1 || !errors.Is(problems[0], ErrGarbage) {
		t.Errorf("a load over 1000 per mille: %v %v, %v", s.HasGPULoad, s.GPULoad, problems)
	}
}

// TestRailsOfTheIIODriver: L4T 32's ina3221x driver (IIO: rail_name_N,
// in_voltageN_input, in_currentN_input, in_powerN_input) is read too; its
// power is the driver's own.
func TestRailsOfTheIIODriver(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.X86)
	dev := "sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0/"
	for ch, r := range []struct{ name, mv, ma, mw string }{{"GPU", "19144", "40", "765"}, {"CPU", "19144", "152", "2910"}, {"SOC", "19144", "706", "13515"}} {
		tr.Write(fmt.Sprintf("%srail_name_%d", dev, ch), r.name)
		tr.Write(fmt.Sprintf("%sin_voltage%d_input", dev, ch), r.mv)
		tr.Write(fmt.Sprintf("%sin_current%d_input", dev, ch), r.ma)
		tr.Write(fmt.Sprintf("%sin_power%d_input", dev, ch), r.mw)
	}
	tr.Write("sys/bus/i2c/drivers/ina3221x/uevent", "DRIVER=ina3221x") // not a device
	s, problems := reader(tr).Read()
	var got []string
	for _, r := range s.Rails {
		got = append(got, fmt.Sprintf("%s %.3f %.3f %.3f %s", r.Name, r.Volts, r.Amps, r.Watts, r.Chip))
	}
	want := []string{"CPU 19.144 0.152 2.910 1-0040", "GPU 19.144 0.040 0.765 1-0040", "SOC 19.144 0.706 13.515 1-0040"}
	if len(problems) > 0 || !slices.Equal(got, want) {
		t.Errorf("rails %q, problems %v; want %q", got, problems, want)
	}
}

// TestPowerModeConfLink: /etc/nvpmodel.conf is a link to the board's own
// file; an absolute target is taken under the root file system, so a
// container reading the host's root at /host names the host's modes.
func TestPowerModeConfLink(t *testing.T) {
	tr := boardtest.Copy(t, boardtest.OrinJP6)
	root := tr.Paths.Root
	if err := os.MkdirAll(filepath.Join(root, "etc/nvpmodel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "etc/nvpmodel.conf"), filepath.Join(root, "etc/nvpmodel/nvpmodel_p3767_0003.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/nvpmodel/nvpmodel_p3767_0003.conf", filepath.Join(root, "etc/nvpmodel.conf")); err != nil {
		t.Fatal(err)
	}
	r := reader(tr)
	s, problems := r.Read()
	if len(problems) > 0 || s.Mode.Name != "15W" || len(s.Mode.Modes) != 4 {
		t.Fatalf("through an absolute link: %+v, problems %v", s.Mode, problems)
	}
	// The configuration is parsed again when it changes (size or time).
	tr.Write("root/etc/nvpmodel/nvpmodel_p3767_0003.conf", "< POWER_MODEL ID=0 NAME=FIFTEEN_WATTS >\n< PM_CONFIG DEFAULT=0 >")
	if s, _ := r.Read(); s.Mode.Name != "FIFTEEN_WATTS" || len(s.Mode.Modes) != 1 {
		t.Errorf("after the configuration changed: %+v", s.Mode)
	}
	// A link that leaves the root is a missing file.
	os.Remove(filepath.Join(root, "etc/nvpmodel.conf"))
	os.Symlink("../../../../outside.conf", filepath.Join(root, "etc/nvpmodel.conf"))
	if s, problems := r.Read(); len(problems) > 0 || s.Mode.Name != "" || !s.Mode.Known || s.Mode.ID != 0 {
		t.Errorf("a link out of the root: %+v, %v", s.Mode, problems)
	}
}

func TestParseConf(t *testing.T) {
	modes, ok := parseConf([]byte(`# comment
< PARAM TYPE=FILE NAME=CPU_ONLINE >
CORE_0 /sys/devices/system/cpu/cpu0/online
<POWER_MODEL ID=3 NAME=7W>
  < POWER_MODEL   NAME=MAXN_SUPER ID=2 >
< POWER_MODEL ID=x NAME=broken >
< POWER_MODEL ID=3 NAME=again >
< PM_CONFIG DEFAULT=2 >
`))
	if !ok || fmt.Sprint(modes) != "[{2 MAXN_SUPER} {3 7W}]" {
		t.Errorf("parseConf: %v %v", modes, ok)
	}
	if _, ok := parseConf([]byte("not nvpmodel\n")); ok {
		t.Error("a file without POWER_MODEL parsed")
	}
}

func TestParseStatus(t *testing.T) {
	for in, want := range map[string]int{"pmode:0000": 0, "pmode:0002\n": 2, "pmode:0003 fmode:quiet": 3, " fmode:cool pmode:0001": 1} {
		if id, ok := parseStatus([]byte(in)); !ok || id != want {
			t.Errorf("parseStatus(%q) = %d, %v; want %d", in, id, ok, want)
		}
	}
	for _, in := range []string{"", "pmode:", "pmode:-1", "mode:1", "pmode:99999"} {
		if id, ok := parseStatus([]byte(in)); ok {
			t.Errorf("parseStatus(%q) = %d, want an error", in, id)
		}
	}
}

func TestParsePSI(t *testing.T) {
	if v, ok := parsePSI([]byte("some avg10=12.50 avg60=3.00 avg300=0.10 total=123\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=4\n")); !ok || v != 12.5 {
		t.Errorf("parsePSI = %v, %v", v, ok)
	}
	for _, in := range []string{"", "full avg10=1.00", "some avg10=x", "some avg10=101", "some avg60=1"} {
		if v, ok := parsePSI([]byte(in)); ok {
			t.Errorf("parsePSI(%q) = %v, want an error", in, v)
		}
	}
}

func FuzzParseConf(f *testing.F) {
	f.Add([]byte("< POWER_MODEL ID=0 NAME=MAXN >\n< PM_CONFIG DEFAULT=0 >\n"))
	f.Add([]byte("<POWER_MODEL ID=65535 NAME=>\n<>\n< POWER_MODEL"))
	f.Fuzz(func(t *testing.T, b []byte) {
		modes, ok := parseConf(b)
		if ok != (len(modes) > 0) {
			t.Fatalf("ok %v with %d modes", ok, len(modes))
		}
		for i := 1; i < len(modes); i++ {
			if modes[i].ID <= modes[i-1].ID {
				t.Fatalf("modes not sorted and unique: %v", modes)
			}
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("pmode:0002 fmode:quiet"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, ok := parseStatus(b); ok && (id < 0 || id > 65535) {
			t.Fatalf("id %d", id)
		}
	})
}

func FuzzParsePSI(f *testing.F) {
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, ok := parsePSI(b); ok && (v < 0 || v > 100) {
			t.Fatalf("avg10 %v", v)
		}
	})
}
