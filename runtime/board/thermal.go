package board

import "fmt"

// maxTrips bounds the trip points read of one zone (Jetson zones have two
// to five).
const maxTrips = 32

// absoluteZero is the lowest temperature a sensor can mean, in
// millidegrees Celsius; a reading below it is garbage.
const absoluteZero = -273150

// zones reads class/thermal/thermal_zone*: type, temp (millidegrees
// Celsius) and trip_point_N_{type,temp}.
func (c *cycle) zones() []Zone {
	dirs := numbered(c.dir(sysfs, "class/thermal", "thermal zones"), "thermal_zone")
	if len(dirs) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(dirs))
	zones := make([]Zone, 0, len(dirs))
	for _, d := range dirs {
		base := "class/thermal/" + d
		typ, st := c.text(sysfs, base+"/type", d+" type")
		if st != ok {
			continue
		}
		z := Zone{Type: typ, Dir: d, Name: unique(seen, typ, d)}
		if v, st := c.integer(sysfs, base+"/temp", typ+" temperature"); st == ok {
			if v < absoluteZero {
				c.garbage(sysfs, base+"/temp", typ+" temperature", fmt.Appendf(nil, "%d", v))
			} else {
				z.Celsius, z.HasTemp = float64(v)/1000, true
			}
		}
		z.Trips = c.trips(base, typ)
		zones = append(zones, z)
	}
	return zones
}

// trips reads a zone's trip points until the first one that is missing.
func (c *cycle) trips(base, typ string) []Trip {
	var trips []Trip
	for i := range maxTrips {
		name := fmt.Sprintf("%s/trip_point_%d_type", base, i)
		what := fmt.Sprintf("%s trip point %d", typ, i)
		tt, st := c.text(sysfs, name, what)
		if st == missing {
			break
		}
		if st != ok {
			continue
		}
		v, st := c.integer(sysfs, fmt.Sprintf("%s/trip_point_%d_temp", base, i), what)
		if st != ok {
			continue
		}
		trips = append(trips, Trip{Type: tt, Celsius: float64(v) / 1000})
	}
	return trips
}
