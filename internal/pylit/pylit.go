package pylit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of lists, tuples and dicts.
const MaxDepth = 32

// ErrSyntax is wrapped by every error of Parse.
var ErrSyntax = errors.New("pylit: not a Python literal")

// Dict is a Python dict, its items in the order written.
type Dict struct {
	Keys, Values []any
}

// Get returns the value of the first key equal to k (a string or an int64).
func (d *Dict) Get(k any) (any, bool) {
	for i, key := range d.Keys {
		if key == k {
			return d.Values[i], true
		}
	}
	return nil, false
}

// Parse reads one literal that makes up the whole of s (surrounding space
// allowed). Values are nil (None), bool, int64, float64, string, []any
// (a list or a tuple) and *Dict.
func Parse(s string) (any, error) {
	p := &parser{s: s}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.s) {
		return nil, p.fail("unexpected %s after the value", p.near())
	}
	return v, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrSyntax, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) near() string {
	if p.i >= len(p.s) {
		return "end of text"
	}
	end := min(p.i+12, len(p.s))
	return strconv.Quote(p.s[p.i:end])
}

func (p *parser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *parser) value(depth int) (any, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, p.fail("a value is missing")
	}
	switch c := p.s[p.i]; {
	case c == '[':
		return p.list(depth, ']')
	case c == '(':
		return p.list(depth, ')')
	case c == '{':
		return p.dict(depth)
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return p.number()
	default:
		for _, w := range []struct {
			name string
			v    any
		}{{"None", nil}, {"True", true}, {"False", false}} {
			if strings.HasPrefix(p.s[p.i:], w.name) && !identByte(p.s, p.i+len(w.name)) {
				p.i += len(w.name)
				return w.v, nil
			}
		}
		return nil, p.fail("unexpected %s", p.near())
	}
}

func identByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// list reads a list or a tuple (a one-element tuple has a trailing comma).
func (p *parser) list(depth int, end byte) (any, error) {
	if depth >= MaxDepth {
		return nil, p.fail("nested more than %d deep", MaxDepth)
	}
	p.i++ // the opening bracket
	out := []any{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if err := p.sep(end); err != nil {
			return nil, err
		}
	}
}

// sep consumes a comma, or sees the closing bracket (left for the caller).
func (p *parser) sep(end byte) error {
	p.space()
	switch {
	case p.i >= len(p.s):
		return p.fail("%q is missing", end)
	case p.s[p.i] == ',':
		p.i++
	case p.s[p.i] != end:
		return p.fail("want ',' or %q, found %s", end, p.near())
	}
	return nil
}

func (p *parser) dict(depth int) (any, error) {
	if depth >= MaxDepth {
		return nil, p.fail("nested more than %d deep", MaxDepth)
	}
	p.i++
	d := &Dict{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch k.(type) {
		case []any, *Dict:
			return nil, p.fail("a dict key must not be a list or a dict")
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.fail("want ':' after a dict key, found %s", p.near())
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.Keys, d.Values = append(d.Keys, k), append(d.Values, v)
		if err := p.sep('}'); err != nil {
			return nil, err
		}
	}
}

func (p *parser) number() (any, error) {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("+-.0123456789eE_xXoObBabcdefABCDEF", p.s[p.i]) >= 0 {
		if (p.s[p.i] == '+' || p.s[p.i] == '-') && p.i > start && p.s[p.i-1] != 'e' && p.s[p.i-1] != 'E' {
			break
		}
		p.i++
	}
	text := p.s[start:p.i]
	// Python's int() syntax: underscores, 0x/0o/0b prefixes; strconv's
	// base 0 reads the same (and rejects a leading 0 in decimals, as
	// Python does, except 0 itself).
	if d := strings.TrimLeft(text, "+-"); len(d) > 1 && d[0] == '0' && d[1] >= '0' && d[1] <= '9' && !strings.ContainsAny(d, ".eE") {
		return nil, p.fail("%q: a decimal integer must not start with 0", text)
	}
	if n, err := strconv.ParseInt(text, 0, 64); err == nil {
		return n, nil
	}
	if strings.ContainsAny(text, "xXoObB") || !strings.ContainsAny(text, ".eE") {
		return nil, p.fail("%q is not a number (or does not fit 64 bits)", text)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, p.fail("%q is not a number (or does not fit 64 bits)", text)
	}
	return f, nil
}

// str reads a string in single or double quotes with Python's escapes;
// adjacent strings are joined, as Python does.
func (p *parser) str() (any, error) {
	var b strings.Builder
	for {
		if err := p.quoted(&b); err != nil {
			return nil, err
		}
		j := p.i
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
			p.i = j
			return b.String(), nil
		}
	}
}

func (p *parser) quoted(b *strings.Builder) error {
	q := p.s[p.i]
	p.i++
	for {
		if p.i >= len(p.s) {
			return p.fail("a string is not closed")
		}
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return nil
		case c == '\n':
			return p.fail("a string runs past the end of the line")
		case c != '\\':
			r, n := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && n == 1 {
				return p.fail("invalid UTF-8 in a string")
			}
			b.WriteString(p.s[p.i : p.i+n])
			p.i += n
		default:
			if err := p.escape(b); err != nil {
				return err
			}
		}
	}
}

var simpleEscapes = map[byte]string{
	'\\': "\\", '\'': "'", '"': "\"", 'n': "\n", 't': "\t", 'r': "\r", 'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '\n': "",
}

func (p *parser) escape(b *strings.Builder) error {
	p.i++ // the backslash
	if p.i >= len(p.s) {
		return p.fail("a string is not closed")
	}
	c := p.s[p.i]
	if s, ok := simpleEscapes[c]; ok {
		b.WriteString(s)
		p.i++
		return nil
	}
	digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
	if digits == 0 {
		if c >= '0' && c <= '7' { // octal, up to three digits
			n, j := 0, p.i
			for j < len(p.s) && j < p.i+3 && p.s[j] >= '0' && p.s[j] <= '7' {
				n = n*8 + int(p.s[j]-'0')
				j++
			}
			p.i = j
			b.WriteRune(rune(n))
			return nil
		}
		// Python keeps an unknown escape as written.
		b.WriteByte('\\')
		return nil
	}
	if p.i+1+digits > len(p.s) {
		return p.fail("\\%c needs %d hex digits", c, digits)
	}
	n, err := strconv.ParseUint(p.s[p.i+1:p.i+1+digits], 16, 32)
	if err != nil || n > utf8.MaxRune || n >= 0xd800 && n < 0xe000 {
		return p.fail("\\%c%s is not a character", c, p.s[p.i+1:p.i+1+digits])
	}
	b.WriteRune(rune(n))
	p.i += 1 + digits
	return nil
}
