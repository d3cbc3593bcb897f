package serialsrc

import "github.com/edged-dev/edged/sensors"

// ParseCSV parses one line of comma-separated numbers (without the line
// ending) into s.Values; there must be exactly len(names) of them, at most
// sensors.MaxSampleValues. It sets s.Names and s.N and leaves the other
// fields alone. Blank lines and lines whose first non-blank character cannot start
// a number (headers, comments) return ErrIgnored.
func ParseCSV(line []byte, names []string, s *sensors.Sample) error {
	line = trimSpace(line)
	if len(line) == 0 {
		return ErrIgnored
	}
	if c := line[0]; !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.') {
		return ErrIgnored
	}
	if len(names) == 0 || len(names) > sensors.MaxSampleValues {
		return ErrMalformed
	}
	n := 0
	start := 0
	for i := 0; i <= len(line); i++ {
		if i < len(line) && line[i] != ',' {
			continue
		}
		if n == len(names) {
			return ErrMalformed // too many columns
		}
		field := trimSpace(line[start:i])
		if len(field) == 0 {
			return ErrMalformed
		}
		v, err := num(field)
		if err != nil {
			return err
		}
		s.Values[n] = v
		n++
		start = i + 1
	}
	if n != len(names) {
		return ErrMalformed
	}
	s.Names, s.N = names, n
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
