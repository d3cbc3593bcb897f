package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/edged-dev/edged/internal/confkeys"
)

// The source kinds: each kind's package declares its keys (confkeys.Keys:
// their defaults and checks) and whether it is a camera; the binary
// registers the kinds it has (cmd/edged/kinds.go). The configuration names
// none of them: a [[source]] table is decoded into Source (every key of
// every kind, so that the strict decoder reports unknown keys and every
// problem at once), then its kind's keys are filled and checked.

// sourceKinds are the registered source kinds, in the order messages list
// them.
var sourceKinds []sourceKind

type sourceKind struct {
	confkeys.Kind
	fields [][2][]int // each key: its field in the kind's keys, and in Source
	own    map[string]bool
}

// RegisterSourceKinds makes the kinds known to the configuration, in
// the order they are listed in messages. It is called before any
// configuration is parsed (at init); a kind registered twice, or one with a
// key that Source does not have with the same type, panics.
func RegisterSourceKinds(kinds ...confkeys.Kind) {
	for _, k := range kinds {
		if _, dup := findSourceKind(k.Name); dup {
			panic(fmt.Sprintf("config: source kind %q registered twice", k.Name))
		}
		fields, own := mapKeys("source", k.Name, k.New(), reflect.TypeFor[Source]())
		sourceKinds = append(sourceKinds, sourceKind{Kind: k, fields: fields, own: own})
	}
}

// mapKeys pairs each key of a kind's keys with the field of the table's
// struct (Source, Sink) that has it; a key the table lacks, or has with
// another type, panics. own says which keys are the kind's (not
// confkeys:"other").
func mapKeys(table, name string, keys confkeys.Keys, tt reflect.Type) (fields [][2][]int, own map[string]bool) {
	src := keyFields(tt)
	own = map[string]bool{}
	kt := reflect.TypeOf(keys).Elem()
	for key, f := range keyFields(kt) {
		s, ok := src[key]
		if !ok || kt.FieldByIndex(f.index).Type != tt.FieldByIndex(s.index).Type {
			panic(fmt.Sprintf("config: %s kind %q has key %q, which %s lacks or has with another type", table, name, key, tt.Name()))
		}
		fields = append(fields, [2][]int{f.index, s.index})
		own[key] = !f.other
	}
	return fields, own
}

// loadKeys copies a table's fields into a kind's keys (store: back).
func loadKeys(fields [][2][]int, keys confkeys.Keys, table any) {
	kv, sv := reflect.ValueOf(keys).Elem(), reflect.ValueOf(table).Elem()
	for _, f := range fields {
		kv.FieldByIndex(f[0]).Set(sv.FieldByIndex(f[1]))
	}
}

func storeKeys(fields [][2][]int, keys confkeys.Keys, table any) {
	kv, sv := reflect.ValueOf(keys).Elem(), reflect.ValueOf(table).Elem()
	for _, f := range fields {
		sv.FieldByIndex(f[1]).Set(kv.FieldByIndex(f[0]))
	}
}

func findSourceKind(name string) (*sourceKind, bool) {
	for i := range sourceKinds {
		if sourceKinds[i].Name == name {
			return &sourceKinds[i], true
		}
	}
	return nil, false
}

type keyField struct {
	index []int
	other bool // confkeys:"other": a key of other kinds it looks at
}

// keyFields maps the toml keys of struct type t (an embedded struct's
// fields count as t's) to their fields.
func keyFields(t reflect.Type) map[string]keyField {
	out := map[string]keyField{}
	for _, f := range reflect.VisibleFields(t) {
		if tag := f.Tag.Get("toml"); f.IsExported() && tag != "" && tag != "-" && !f.Anonymous {
			out[tag] = keyField{index: f.Index, other: f.Tag.Get("confkeys") == "other"}
		}
	}
	return out
}

// keys returns s's keys as its kind's package declares them.
func (k *sourceKind) keys(s *Source) confkeys.Keys {
	keys := k.New()
	loadKeys(k.fields, keys, s)
	return keys
}

// store writes keys back into s.
func (k *sourceKind) store(keys confkeys.Keys, s *Source) { storeKeys(k.fields, keys, s) }

// IsCamera reports whether a source kind produces frames.
func IsCamera(kind string) bool {
	k, ok := findSourceKind(kind)
	return ok && k.Camera
}

// isSensor reports whether a source kind produces samples.
func isSensor(kind string) bool {
	k, ok := findSourceKind(kind)
	return ok && !k.Camera
}

// isSourceKey reports whether key is one of kind's keys.
func isSourceKey(kind, key string) bool {
	k, ok := findSourceKind(kind)
	return ok && k.own[key]
}

// sourceKindNames lists the registered kinds (only the cameras with
// cameras), quoted or not, the last after "or" (or, with sep ", ", after a
// comma).
func sourceKindNames(cameras, quoted bool, last string) string {
	var names []string
	for _, k := range sourceKinds {
		if k.Camera || !cameras {
			names = append(names, k.Name)
		}
	}
	return kindList(names, quoted, last)
}

// kindList lists names, quoted or not, the last after last (" or ", or
// ", ").
func kindList(names []string, quoted bool, last string) string {
	if quoted {
		names = slices.Clone(names)
		for i, n := range names {
			names[i] = fmt.Sprintf("%q", n)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + last + names[len(names)-1]
}

// problemsAt reports a kind's problems at the keys of one table (at names
// them).
type problemsAt struct {
	k  *checker
	at func(string) string
}

func (p problemsAt) Add(key, format string, args ...any) { p.k.add(p.at(key), format, args...) }

// SourceKindNames lists the registered source kinds, in order.
func SourceKindNames() []string {
	names := make([]string, len(sourceKinds))
	for i, k := range sourceKinds {
		names[i] = k.Name
	}
	return names
}
