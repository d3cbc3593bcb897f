package config

import (
	"encoding/hex"
	"fmt"
)

// The [[source]] tables: each kind's defaults and the checks of its keys
// are its package's (kinds.go); what is here is the same for every kind.

// defaults fills a [[source]] table by its kind.
func (s *Source) defaults() {
	if k, ok := findSourceKind(s.Kind); ok {
		keys := k.keys(s)
		keys.Defaults()
		k.store(keys, s)
	}
}

func (c *Config) checkSource(k *checker, i int) {
	s := &c.Sources[i]
	at := func(key string) string { return fmt.Sprintf("source[%d].%s", i, key) }
	switch kind, ok := findSourceKind(s.Kind); {
	case ok:
		kind.keys(s).Check(problemsAt{k, at})
	case s.Kind == "":
		k.add(fmt.Sprintf("source[%d]", i), "missing kind (%s)", sourceKindNames(false, true, " or "))
	default:
		k.add(at("kind"), "%q is not one of %s", s.Kind, sourceKindNames(false, true, ", "))
	}
}

// checkSourceFiles checks that the password file of each source whose kind
// has one (a network camera) can be read (CheckFiles).
func (c *Config) checkSourceFiles(k *checker) {
	for i := range c.Sources {
		s := &c.Sources[i]
		if !isSourceKey(s.Kind, "password_file") || s.PasswordFile == "" {
			continue
		}
		if _, err := c.ReadNamed(s.PasswordFile, MaxPasswordFileBytes); err != nil {
			k.add(fmt.Sprintf("source[%d].password_file", i), "password file %s: %v", c.Resolve(s.PasswordFile), errCause(err))
		}
	}
}

// SourceFiles identifies the content of the files source s names (a
// network camera's password file), as this configuration read them, as
// SinkFiles does for sinks: a reload that only changes what such a file
// holds restarts the pipelines of the source with it.
func (c *Config) SourceFiles(s *Source) string {
	if s == nil || !isSourceKey(s.Kind, "password_file") || s.PasswordFile == "" {
		return ""
	}
	f := c.named(c.Resolve(s.PasswordFile), MaxPasswordFileBytes)
	if f.err != nil {
		return "password_file=error " + f.err.Error()
	}
	return "password_file=" + hex.EncodeToString(f.sum[:])
}
