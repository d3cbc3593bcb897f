package config

import (
	"bytes"
	"fmt"
	"strings"
)

// keyIndex maps key paths such as "pipeline[1].model" to where they are
// written, so validation errors can name file:line:column. BurntSushi/toml
// keeps key positions private, so this is a small scanner of its own: it
// understands table headers, arrays of tables, dotted keys and inline
// tables, and skips strings, comments and multi-line values.
type keyIndex struct {
	at     map[string][2]int // path -> line, column (1-based)
	counts map[string]int    // array-of-tables name -> elements seen
}

func indexKeys(data []byte) *keyIndex {
	ix := &keyIndex{at: map[string][2]int{}, counts: map[string]int{}}
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
		col := len(line) - len(trim) + 1
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
		switch {
		case strings.HasPrefix(val, `"""`) && strings.Count(val, `"""`) == 1:
			inMulti = `"""`
		case strings.HasPrefix(val, `'''`) && strings.Count(val, `'''`) == 1:
			inMulti = `'''`
		case strings.HasPrefix(val, "{"):
			ix.inline(path, line, n+1)
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
		if k, _, ok := splitKey(t); ok {
			ix.set(path+"."+k, n, off+field.start+len(field.text)-len(t)+1)
		}
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
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth == 0 {
				return append(out, field{s[start:i], start})
			}
			depth--
		case c == ',' && depth == 0:
			out = append(out, field{s[start:i], start})
			start = i + 1
		}
	}
	return append(out, field{s[start:], start})
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
		case c == '#':
			return d
		case c == '[' || c == '{':
			d++
		case c == ']' || c == '}':
			d--
		}
	}
	return d
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
