package config

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// keyIndex maps key paths such as "pipeline[1].model" to where they are
// written, so validation errors can name file:line:column. BurntSushi/toml
// keeps key positions private, so this is a small scanner of its own: it
// understands table headers, arrays of tables, dotted keys and inline
// tables, and skips strings, comments and multi-line values.
type keyIndex struct {
	at     map[string][2]int // path -> line, column (1-based) of the key or table header
	val    map[string][2]int // path -> line, column of the key's value
	counts map[string]int    // array-of-tables name -> elements seen
}

func newKeyIndex() *keyIndex {
	return &keyIndex{at: map[string][2]int{}, val: map[string][2]int{}, counts: map[string]int{}}
}

// column is the 1-based column of byte offset off in line, counted in
// characters as editors count them.
func column(line string, off int) int { return utf8.RuneCountInString(line[:off]) + 1 }

func indexKeys(data []byte) *keyIndex {
	ix := newKeyIndex()
	var table string // current table path with indices, e.g. "pipeline[0].preprocess"
	lines := bytes.Split(data, []byte("\n"))
	depth := 0    // bracket depth of a multi-line array or inline table
	inMulti := "" // open multi-line string delimiter
	for n, raw := range lines {
		line := string(raw)
		if inMulti != "" {
			if strings.Contains(line, inMulti) {
				inMulti = ""
			}
			continue
		}
		trim := strings.TrimLeft(line, " \t")
		col := column(line, len(line)-len(trim))
		if depth > 0 {
			depth += bracketDelta(trim)
			continue
		}
		if trim == "" || trim[0] == '#' {
			continue
		}
		if strings.HasPrefix(trim, "[[") {
			name := headerName(trim[2:], "]]")
			base := ix.resolveArray(name)
			i := ix.counts[base]
			ix.counts[base] = i + 1
			table = fmt.Sprintf("%s[%d]", base, i)
			ix.set(table, n+1, col)
			continue
		}
		if trim[0] == '[' {
			name := headerName(trim[1:], "]")
			table = ix.resolveArray(name)
			ix.set(table, n+1, col)
			continue
		}
		key, rest, ok := splitKey(trim)
		if !ok {
			continue
		}
		path := key
		if table != "" {
			path = table + "." + key
		}
		ix.set(path, n+1, col)
		val := strings.TrimLeft(rest, " \t")
		ix.setValue(path, n+1, column(line, len(line)-len(val)))
		switch {
		case strings.HasPrefix(val, `"""`) && strings.Count(val, `"""`) == 1:
			inMulti = `"""`
		case strings.HasPrefix(val, `'''`) && strings.Count(val, `'''`) == 1:
			inMulti = `'''`
		case strings.HasPrefix(val, "{"):
			ix.inline(path, line, n+1)
			depth = bracketDelta(val)
		case strings.HasPrefix(val, "["):
			ix.elements(path, line, n+1, len(line)-len(val))
			depth = bracketDelta(val)
		default:
			depth = bracketDelta(val)
		}
	}
	return ix
}

// resolveArray rewrites a header such as "pipeline.preprocess" to the path
// of the last element of every array of tables it passes through
// ("pipeline[2].preprocess").
func (ix *keyIndex) resolveArray(name string) string {
	parts := strings.Split(name, ".")
	out := ""
	for i, p := range parts {
		if out != "" {
			out += "."
		}
		out += p
		if i < len(parts)-1 {
			if c, ok := ix.counts[out]; ok && c > 0 {
				out = fmt.Sprintf("%s[%d]", out, c-1)
			}
		}
	}
	return out
}

func (ix *keyIndex) set(path string, line, col int) {
	if _, dup := ix.at[path]; !dup {
		ix.at[path] = [2]int{line, col}
	}
}

func (ix *keyIndex) setValue(path string, line, col int) {
	if _, dup := ix.val[path]; !dup {
		ix.val[path] = [2]int{line, col}
	}
}

// inline records the keys of an inline table written on one line.
func (ix *keyIndex) inline(path, line string, n int) {
	open := strings.IndexByte(line, '{')
	if open < 0 {
		return
	}
	body := line[open+1:]
	off := open + 1
	for _, field := range splitTopLevel(body) {
		t := strings.TrimLeft(field.text, " \t")
		if k, rest, ok := splitKey(t); ok {
			start := off + field.start + len(field.text) - len(t)
			ix.set(path+"."+k, n, column(line, start))
			v := strings.TrimLeft(rest, " \t")
			ix.setValue(path+"."+k, n, column(line, start+len(t)-len(v)))
		}
	}
}

// elements records where the elements of an array written on one line,
// at byte offset open of line, are: path[0], path[1], ... (a problem with
// one element points at it).
func (ix *keyIndex) elements(path, line string, n, open int) {
	body := line[open+1:]
	if bracketDelta(line[open:]) != 0 {
		return // continued on the next lines
	}
	for i, f := range splitTopLevel(body) {
		t := strings.TrimLeft(f.text, " \t")
		if strings.TrimSpace(t) == "" {
			break // [] or a trailing comma
		}
		ix.setValue(fmt.Sprintf("%s[%d]", path, i), n, column(line, open+1+f.start+len(f.text)-len(t)))
	}
}

type field struct {
	text  string
	start int
}

// splitTopLevel splits an inline table body at commas outside strings and
// brackets.
func splitTopLevel(s string) []field {
	var out []field
	depth, start := 0, 0
	closed := false
	outsideStrings(s, func(i int, c byte) bool {
		switch {
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth == 0 {
				out = append(out, field{s[start:i], start})
				closed = true
				return false
			}
			depth--
		case c == ',' && depth == 0:
			out = append(out, field{s[start:i], start})
			start = i + 1
		}
		return true
	})
	if closed {
		return out
	}
	return append(out, field{s[start:], start})
}

// outsideStrings calls f with each byte of s that is outside TOML strings
// (basic "…" with backslash escapes, literal '…'; the quotes themselves are
// not passed), in order, until f returns false.
func outsideStrings(s string, f func(i int, c byte) bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		default:
			if !f(i, c) {
				return
			}
		}
	}
}

func headerName(s, end string) string {
	if i := strings.Index(s, end); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	for i := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(parts[i]), `"'`)
	}
	return strings.Join(parts, ".")
}

// splitKey splits `key = value` (dotted keys allowed).
func splitKey(s string) (key, rest string, ok bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '=':
			k := strings.TrimSpace(s[:i])
			if k == "" {
				return "", "", false
			}
			parts := strings.Split(k, ".")
			for j := range parts {
				parts[j] = strings.Trim(strings.TrimSpace(parts[j]), `"'`)
			}
			return strings.Join(parts, "."), s[i+1:], true
		}
	}
	return "", "", false
}

// bracketDelta counts unbalanced [ and { outside strings and comments.
func bracketDelta(s string) int {
	d := 0
	outsideStrings(s, func(_ int, c byte) bool {
		switch c {
		case '#':
			return false
		case '[', '{':
			d++
		case ']', '}':
			d--
		}
		return true
	})
	return d
}

// valuePos returns where the value of key path is written; for a path
// that is not a written key (a table, a key left out), where its closest
// written ancestor is (pos).
func (ix *keyIndex) valuePos(path string) (line, col int) {
	if at, ok := ix.val[path]; ok {
		return at[0], at[1]
	}
	return ix.pos(path)
}

// pos returns where path (or its closest written ancestor) is written.
func (ix *keyIndex) pos(path string) (line, col int) {
	for p := path; p != ""; {
		if at, ok := ix.at[p]; ok {
			return at[0], at[1]
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0, 0
}
