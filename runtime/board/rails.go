package board

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The INA3221 power monitors, by the kernel driver that binds them:
//
//   - ina3221 (JetPack 5 and 6, Linux's hwmon driver):
//     bus/i2c/drivers/ina3221/<bus>-<addr>/hwmon/hwmonN/in{1,2,3}_label,
//     in{1,2,3}_input (bus voltage, mV), curr{1,2,3}_input (mA); in7 is the
//     sum of the shunt voltages, not a rail.
//   - ina3221x (L4T 32 / JetPack 4, NVIDIA's IIO driver):
//     bus/i2c/drivers/ina3221x/<bus>-<addr>/iio:deviceN/rail_name_{0,1,2},
//     in_voltageN_input (mV), in_currentN_input (mA), in_powerN_input (mW).
//
// A channel labelled NC is not connected (Jetson AGX Orin's second
// monitor).
const (
	hwmonDriver = "bus/i2c/drivers/ina3221"
	iioDriver   = "bus/i2c/drivers/ina3221x"
)

// rails reads every INA3221 channel of both drivers.
func (c *cycle) rails() []Rail {
	var rails []Rail
	for _, chip := range c.dir(sysfs, hwmonDriver, "INA3221 devices") {
		base := hwmonDriver + "/" + chip + "/hwmon"
		for _, hw := range numbered(c.dirIfThere(sysfs, base), "hwmon") {
			for ch := 1; ch <= 3; ch++ {
				if r, st := c.hwmonRail(base+"/"+hw, ch); st == ok {
					r.Chip = chip
					rails = append(rails, r)
				}
			}
		}
	}
	for _, chip := range c.dir(sysfs, iioDriver, "INA3221 devices") {
		base := iioDriver + "/" + chip
		for _, dev := range numbered(c.dirIfThere(sysfs, base), "iio:device") {
			for ch := 0; ch <= 2; ch++ {
				if r, st := c.iioRail(base+"/"+dev, ch); st == ok {
					r.Chip = chip
					rails = append(rails, r)
				}
			}
		}
	}
	slices.SortStableFunc(rails, func(a, b Rail) int { return strings.Compare(a.Name, b.Name) })
	seen := make(map[string]bool, len(rails))
	for i := range rails {
		rails[i].Name = unique(seen, rails[i].Name, rails[i].Chip)
	}
	return rails
}

// dirIfThere lists a folder that may be missing or not a folder at all
// (a driver folder also holds bind, unbind, uevent): nothing to report.
func (c *cycle) dirIfThere(t tree, name string) []string {
	fsys, _ := c.fsys(t)
	ents, err := readDirNames(fsys, name)
	if err != nil {
		return nil
	}
	return ents
}

func (c *cycle) hwmonRail(dir string, ch int) (Rail, found) {
	label, st := c.text(sysfs, fmt.Sprintf("%s/in%d_label", dir, ch), fmt.Sprintf("INA3221 channel %d label", ch))
	if st != ok || label == "NC" {
		return Rail{}, missing
	}
	mv, st := c.ranged(sysfs, fmt.Sprintf("%s/in%d_input", dir, ch), label+" voltage", 0, math.MaxInt32)
	if st != ok {
		return Rail{}, st
	}
	ma, st := c.ranged(sysfs, fmt.Sprintf("%s/curr%d_input", dir, ch), label+" current", math.MinInt32, math.MaxInt32)
	if st != ok {
		return Rail{}, st
	}
	// mV × mA is µW, exact in int64; one division rounds it.
	return Rail{Name: label, Volts: float64(mv) / 1000, Amps: float64(ma) / 1000, Watts: float64(mv*ma) / 1e6}, ok
}

func (c *cycle) iioRail(dir string, ch int) (Rail, found) {
	label, st := c.text(sysfs, fmt.Sprintf("%s/rail_name_%d", dir, ch), fmt.Sprintf("INA3221 channel %d name", ch))
	if st != ok || label == "NC" {
		return Rail{}, missing
	}
	mv, st := c.ranged(sysfs, fmt.Sprintf("%s/in_voltage%d_input", dir, ch), label+" voltage", 0, math.MaxInt32)
	if st != ok {
		return Rail{}, st
	}
	ma, st := c.ranged(sysfs, fmt.Sprintf("%s/in_current%d_input", dir, ch), label+" current", math.MinInt32, math.MaxInt32)
	if st != ok {
		return Rail{}, st
	}
	r := Rail{Name: label, Volts: float64(mv) / 1000, Amps: float64(ma) / 1000, Watts: float64(mv*ma) / 1e6}
	if mw, st := c.ranged(sysfs, fmt.Sprintf("%s/in_power%d_input", dir, ch), label+" power", math.MinInt32, math.MaxInt32); st == ok {
		r.Watts = float64(mw) / 1000 // the driver's own product
	}
	return r, ok
}
