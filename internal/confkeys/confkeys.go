package confkeys

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Problems is where a kind reports what is wrong with the keys of one of
// its tables.
type Problems interface {
	// Add reports a problem with key (a key of the table, such as
	// "width"), in words made as fmt.Sprintf makes them.
	Add(key, format string, args ...any)
}

// OneOf reports key's value v unless it is one of allowed.
func OneOf(p Problems, key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		p.Add(key, "%q is not one of %s", v, QuoteList(allowed))
	}
}

// QuoteList writes s as a list of quoted words: "a", "b", "c".
func QuoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// Default sets *s to v when it is empty.
func Default(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

// Duration is a time.Duration written as a string such as "250ms".
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use a number with a unit, such as \"250ms\" or \"5s\")", b)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Keys are a kind's keys: a pointer to a struct whose fields are keys of
// the kind's table, named by their toml tags (an embedded struct's fields
// count as its own). A field tagged confkeys:"other" is a key of other
// kinds that this kind looks at only to refuse or bound it (a network
// camera's width): it is not one of the kind's keys.
type Keys interface {
	// Defaults fills the keys left out with their documented defaults.
	Defaults()
	// Check reports every problem of the keys, after Defaults.
	Check(p Problems)
}

// Kind is a kind as its package declares it to the configuration.
type Kind struct {
	Name string
	// Camera: the kind's sources produce frames (a pipeline's source);
	// else samples (a pipeline's sensors).
	Camera bool
	// New returns the kind's keys, zero.
	New func() Keys
}

// SinkKind is a sink kind as its package declares it to the configuration.
type SinkKind struct {
	Name string
	// New returns the kind's keys, zero.
	New func() Keys
	// Listens: a sink of the kind listens on a Unix socket, which
	// systemd's socket activation may pass it.
	Listens bool
	// Holds names what the sink called name, with keys, holds
	// exclusively, so that a reload builds a sink that takes it over
	// only after the one holding it stopped; resolve makes a path of the
	// configuration absolute. Nil: only its own replacement waits.
	Holds func(name string, keys Keys, resolve func(string) string) string
	// Files are the keys that name files the configuration reads (and
	// keeps, to see a reload that only changes them), in order.
	Files []File
}

// File is a key that names a file, and the most bytes read from it.
type File struct {
	Key   string
	Limit int64
}

// ParseMode parses an octal file mode such as "0660".
func ParseMode(s string) (os.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return 0, fmt.Errorf("invalid file mode %q (use octal permission bits such as \"0660\")", s)
	}
	return os.FileMode(v), nil
}

// The most bytes a configuration reads from a file it names: a password
// file, and a PEM file (a bundle of every public root CA is about 220 KB).
const (
	MaxPasswordFileBytes = 64 << 10
	MaxPEMFileBytes      = 1 << 20
)
