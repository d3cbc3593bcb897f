package board

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The series of the board (docs/OPERATIONS.md, "Board health"); the names
// are edged's contract.
var (
	descZone      = prometheus.NewDesc("edged_thermal_zone_celsius", "Temperature of each thermal zone (class/thermal/thermal_zoneN/temp), by the zone's type.", []string{"zone"}, nil)
	descGPULoad   = prometheus.NewDesc("edged_gpu_load_ratio", "GPU busy share, 0 to 1 (nvgpu's load, read every few seconds).", nil, nil)
	descFreq      = prometheus.NewDesc("edged_frequency_hertz", "Clock frequency of the GPU, the EMC and each CPU cluster (cpufreq policy).", []string{"unit"}, nil)
	descFreqMax   = prometheus.NewDesc("edged_frequency_max_hertz", "Highest frequency each clock may run at now: the power mode's cap, lowered while a zone throttles.", []string{"unit"}, nil)
	descPowerMode = prometheus.NewDesc("edged_power_mode", "nvpmodel's power modes: 1 for the active one, 0 for the others its configuration defines.", []string{"mode", "name"}, nil)
	descPower     = prometheus.NewDesc("edged_power_watts", "Power of each INA3221 rail (bus voltage times current).", []string{"rail"}, nil)
	descMemAvail  = prometheus.NewDesc("edged_memory_available_bytes", "MemAvailable of procfs's meminfo, read every few seconds (on a Jetson also the GPU's memory).", nil, nil)
	descPressure  = prometheus.NewDesc("edged_memory_pressure_ratio", "Share of the last 10 s in which at least one task waited for memory (PSI memory some avg10 / 100).", nil, nil)
)

// Collector returns the monitor's Prometheus collector: it exports the
// latest read cycle and reads nothing itself, so a scrape costs only the
// formatting. A series whose file is missing or unusable is left out.
func (m *Monitor) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Monitor }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descZone, descGPULoad, descFreq, descFreqMax, descPowerMode, descPower, descMemAvail, descPressure} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.snap.Load()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, z := range s.Zones {
		if z.HasTemp {
			gauge(descZone, z.Celsius, z.Name)
		}
	}
	if s.HasGPULoad {
		gauge(descGPULoad, s.GPULoad)
	}
	for _, f := range s.Freqs {
		if f.HasHz {
			gauge(descFreq, f.Hz, f.Unit)
		}
		if f.HasMax {
			gauge(descFreqMax, f.Max, f.Unit)
		}
	}
	if p := s.Mode; p.Known {
		active := false
		for _, mode := range p.Modes {
			v := 0.0
			if mode.ID == p.ID {
				v, active = 1, true
			}
			gauge(descPowerMode, v, strconv.Itoa(mode.ID), mode.Name)
		}
		if !active { // a mode the configuration does not define
			gauge(descPowerMode, 1, strconv.Itoa(p.ID), p.Name)
		}
	}
	for _, r := range s.Rails {
		gauge(descPower, r.Watts, r.Name)
	}
	if s.Memory.HasMeminfo {
		gauge(descMemAvail, float64(s.Memory.Available))
	}
	if s.Memory.HasPressure {
		gauge(descPressure, s.Memory.Pressure)
	}
}
