package board

import (
	"math"
	"slices"
	"strings"
)

// gpuNodes are the device-tree node names of Jetson GPUs, the part of a
// devfreq device's name after its unit address: 17000000.ga10b (Orin,
// JetPack 5), 17000000.gpu (Orin, JetPack 6), 17000000.gv11b (Xavier),
// 17000000.gp10b (TX2).
var gpuNodes = []string{"ga10b", "gpu", "gv11b", "gp10b"}

// gpuLoadFiles are where nvgpu's load (per mille) is, first found wins:
// JetPack 6 links the GPU as devices/platform/gpu.0, JetPack 5 (Orin,
// Xavier) as devices/gpu.0; the devfreq device's parent is the GPU itself.
var gpuLoadFiles = []string{"devices/platform/gpu.0/load", "devices/gpu.0/load"}

// gpu reads the GPU's devfreq node (class/devfreq/<addr>.<node>:
// cur_freq and max_freq in Hz) and its load.
func (c *cycle) gpu() (load float64, hasLoad bool, freqs []Freq) {
	var dev string
	for _, name := range c.dir(sysfs, "class/devfreq", "devfreq devices") {
		_, node, cut := strings.Cut(name, ".")
		if cut && slices.Contains(gpuNodes, node) {
			dev = "class/devfreq/" + name
			break // ReadDir sorts by name; a Jetson has one GPU
		}
	}
	if dev != "" {
		f := Freq{Unit: "gpu"}
		if v, st := c.ranged(sysfs, dev+"/cur_freq", "GPU frequency", 0, math.MaxInt64); st == ok {
			f.Hz, f.HasHz = float64(v), true
		}
		if v, st := c.ranged(sysfs, dev+"/max_freq", "GPU maximum frequency", 0, math.MaxInt64); st == ok {
			f.Max, f.HasMax = float64(v), true
		}
		if f.HasHz || f.HasMax {
			freqs = append(freqs, f)
		}
	}
	files := gpuLoadFiles
	if dev != "" {
		files = append(files[:len(files):len(files)], dev+"/device/load")
	}
	for _, name := range files {
		v, st := c.ranged(sysfs, name, "GPU load", 0, 1000)
		if st == missing {
			continue
		}
		if st == ok {
			load, hasLoad = float64(v)/1000, true
		}
		break
	}
	return load, hasLoad, freqs
}

// The EMC (memory controller) clock: BPMP's debugfs on Orin and Xavier
// with JetPack 5 and 6 (root only), capped by nvpmodel.
const (
	emcRate    = "kernel/debug/bpmp/debug/clk/emc/rate"
	emcMaxRate = "kernel/debug/bpmp/debug/clk/emc/max_rate"
	emcCap     = "kernel/nvpmodel_emc_cap/emc_iso_cap" // 0: no cap
)

// emc reads the EMC frequency and its maximum: the lower of the clock's
// max_rate and nvpmodel's cap.
func (c *cycle) emc() []Freq {
	f := Freq{Unit: "emc"}
	if v, st := c.ranged(sysfs, emcRate, "EMC frequency", 0, math.MaxInt64); st == ok {
		f.Hz, f.HasHz = float64(v), true
	}
	if v, st := c.ranged(sysfs, emcMaxRate, "EMC maximum frequency", 0, math.MaxInt64); st == ok && v > 0 {
		f.Max, f.HasMax = float64(v), true
	}
	if v, st := c.ranged(sysfs, emcCap, "EMC cap of the power mode", 0, math.MaxInt64); st == ok && v > 0 && (!f.HasMax || float64(v) < f.Max) {
		f.Max, f.HasMax = float64(v), true
	}
	if !f.HasHz && !f.HasMax {
		return nil
	}
	return []Freq{f}
}

// cpus reads every cpufreq policy (one per CPU cluster):
// scaling_cur_freq and scaling_max_freq, in kHz.
func (c *cycle) cpus() []Freq {
	const base = "devices/system/cpu/cpufreq"
	policies := numbered(c.dir(sysfs, base, "cpufreq policies"), "policy")
	var out []Freq
	for _, p := range policies {
		f := Freq{Unit: "cpu_" + p}
		if v, st := c.ranged(sysfs, base+"/"+p+"/scaling_cur_freq", "CPU frequency of "+p, 0, math.MaxInt64); st == ok {
			f.Hz, f.HasHz = float64(v)*1000, true
		}
		if v, st := c.ranged(sysfs, base+"/"+p+"/scaling_max_freq", "CPU maximum frequency of "+p, 0, math.MaxInt64); st == ok {
			f.Max, f.HasMax = float64(v)*1000, true
		}
		if f.HasHz || f.HasMax {
			out = append(out, f)
		}
	}
	return out
}
