package serialsrc

import (
	"errors"
	"math"
	"strconv"

	"github.com/edged-dev/edged/sensors"
)

// Parser errors. They are returned unwrapped so parsing never allocates.
var (
	// ErrChecksum means an NMEA checksum or a packet CRC did not match.
	ErrChecksum = errors.New("serialsrc: checksum mismatch")
	// ErrMalformed means a line or packet is not well formed.
	ErrMalformed = errors.New("serialsrc: malformed input")
	// ErrIgnored means well-formed input that carries no sample (an NMEA
	// sentence other than GGA/RMC, a CSV header or comment).
	ErrIgnored = errors.New("serialsrc: input ignored")
)

// Value names of the NMEA sample kinds "gga" and "rmc".
var (
	GGANames = []string{"time_s", "lat", "lon", "fix", "sats", "hdop", "alt_m"}
	RMCNames = []string{"time_s", "valid", "lat", "lon", "speed_mps", "course_deg"}
)

const knotsToMPS = 1852.0 / 3600.0

// ParseNMEA parses one NMEA 0183 sentence (without the line ending) into
// s's Kind, Names, Values and N; the other fields of s are left alone. It
// verifies the checksum, which is mandatory. time_s is seconds since UTC
// midnight; valid (RMC) is 1 for status A and 0 otherwise.
func ParseNMEA(line []byte, s *sensors.Sample) error {
	if len(line) < 7 || line[0] != '$' {
		return ErrMalformed
	}
	star := -1
	for i := len(line) - 1; i > 0 && i >= len(line)-4; i-- {
		if line[i] == '*' {
			star = i
			break
		}
	}
	if star < 0 || len(line)-star != 3 {
		return ErrMalformed
	}
	want, ok := hexByte(line[star+1], line[star+2])
	if !ok {
		return ErrMalformed
	}
	var sum byte
	for _, c := range line[1:star] {
		sum ^= c
	}
	if sum != want {
		return ErrChecksum
	}
	body := line[1:star]
	var f [20][]byte
	n := splitFields(body, ',', f[:])
	if n < 1 || len(f[0]) != 5 {
		if n >= 1 && len(f[0]) > 0 && f[0][0] == 'P' {
			return ErrIgnored // proprietary sentence
		}
		return ErrMalformed
	}
	switch string(f[0][2:]) {
	case "GGA":
		if n < 10 {
			return ErrMalformed
		}
		var v [7]float64
		var err error
		if v[0], err = nmeaTime(f[1]); err != nil {
			return err
		}
		if v[1], err = nmeaCoord(f[2], f[3], 2, 'N', 'S'); err != nil {
			return err
		}
		if v[2], err = nmeaCoord(f[4], f[5], 3, 'E', 'W'); err != nil {
			return err
		}
		for i, k := range [4]int{6, 7, 8, 9} {
			if v[3+i], err = num(f[k]); err != nil {
				return err
			}
		}
		s.Kind, s.Names, s.N = "gga", GGANames, len(GGANames)
		copy(s.Values[:], v[:])
	case "RMC":
		if n < 9 {
			return ErrMalformed
		}
		var v [6]float64
		var err error
		if v[0], err = nmeaTime(f[1]); err != nil {
			return err
		}
		switch string(f[2]) {
		case "A":
			v[1] = 1
		case "V", "":
			v[1] = 0
		default:
			return ErrMalformed
		}
		if v[2], err = nmeaCoord(f[3], f[4], 2, 'N', 'S'); err != nil {
			return err
		}
		if v[3], err = nmeaCoord(f[5], f[6], 3, 'E', 'W'); err != nil {
			return err
		}
		if v[4], err = num(f[7]); err != nil {
			return err
		}
		v[4] *= knotsToMPS
		if v[5], err = num(f[8]); err != nil {
			return err
		}
		s.Kind, s.Names, s.N = "rmc", RMCNames, len(RMCNames)
		copy(s.Values[:], v[:])
	default:
		return ErrIgnored
	}
	return nil
}

func hexByte(a, b byte) (byte, bool) {
	h, ok1 := hexDigit(a)
	l, ok2 := hexDigit(b)
	return h<<4 | l, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// splitFields splits b at sep into f and returns the number of fields; it
// stops at len(f) (the last field then holds the rest).
func splitFields(b []byte, sep byte, f [][]byte) int {
	n := 0
	start := 0
	for i := 0; i < len(b) && n < len(f)-1; i++ {
		if b[i] == sep {
			f[n] = b[start:i]
			n++
			start = i + 1
		}
	}
	f[n] = b[start:]
	return n + 1
}

// num parses a decimal number; an empty field is NaN.
func num(b []byte) (float64, error) {
	if len(b) == 0 {
		return math.NaN(), nil
	}
	if len(b) > 32 {
		return 0, ErrMalformed
	}
	for _, c := range b {
		// strconv also accepts "inf", "nan", hex and '_'; sensors send
		// plain decimals.
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E') {
			return 0, ErrMalformed
		}
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, ErrMalformed
	}
	return v, nil
}

// nmeaTime converts hhmmss[.sss] to seconds since midnight.
func nmeaTime(b []byte) (float64, error) {
	if len(b) == 0 {
		return math.NaN(), nil
	}
	if len(b) < 6 {
		return 0, ErrMalformed
	}
	for _, c := range b[:6] {
		if c < '0' || c > '9' {
			return 0, ErrMalformed
		}
	}
	h := float64((b[0]-'0')*10 + b[1] - '0')
	m := float64((b[2]-'0')*10 + b[3] - '0')
	sec, err := num(b[4:])
	if err != nil || h > 23 || m > 59 || sec >= 61 {
		return 0, ErrMalformed
	}
	return h*3600 + m*60 + sec, nil
}

// nmeaCoord converts (d)ddmm.mmmm plus a hemisphere letter to signed
// degrees.
func nmeaCoord(b, hemi []byte, degDigits int, pos, neg byte) (float64, error) {
	if len(b) == 0 {
		return math.NaN(), nil
	}
	if len(b) < degDigits+2 || len(hemi) != 1 {
		return 0, ErrMalformed
	}
	var deg float64
	for _, c := range b[:degDigits] {
		if c < '0' || c > '9' {
			return 0, ErrMalformed
		}
		deg = deg*10 + float64(c-'0')
	}
	min, err := num(b[degDigits:])
	if err != nil || min < 0 || min >= 60 {
		return 0, ErrMalformed
	}
	v := deg + min/60
	switch hemi[0] {
	case pos:
	case neg:
		v = -v
	default:
		return 0, ErrMalformed
	}
	return v, nil
}
