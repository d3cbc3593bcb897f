package config

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxModelNameLen bounds the length of a model name in bytes.
const MaxModelNameLen = 64

// CheckModelName reports why name cannot name a [[model]], or nil. A model
// name becomes a file name (the last-good copy
// <state_dir>/last-good/<name>.model) and a metric label, so it is limited
// to a character set that means the same on every file system: ASCII
// letters, digits, '.', '_' and '-', not starting with '.' (no hidden
// files, no "." or ".."), at most MaxModelNameLen bytes. Two valid names
// never name the same file.
func CheckModelName(name string) error {
	if name == "" {
		return fmt.Errorf("empty model name")
	}
	if len(name) > MaxModelNameLen {
		return fmt.Errorf("model name %q is %d bytes long, more than %d", name, len(name), MaxModelNameLen)
	}
	if name[0] == '.' {
		return fmt.Errorf("model name %q starts with '.'; use ASCII letters, digits, '.', '_' and '-', not starting with '.' (the name is used as a file name in the state folder)", name)
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return fmt.Errorf("model name %q has %q at byte %d; use ASCII letters, digits, '.', '_' and '-', not starting with '.' (the name is used as a file name in the state folder)", name, r, i)
	}
	return nil
}
