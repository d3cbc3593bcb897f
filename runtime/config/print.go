package config

import (
	"bytes"
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Encode renders the effective configuration (defaults filled in) as
// TOML, every key of each table's kind written with the value in force
// (edged config print): a socket sink shows no baud, a serial source no
// seed.
func Encode(c *Config) (string, error) {
	p := printable(c)
	return encode(ofKind(reflect.ValueOf(p).Elem()).Interface())
}

// Equal reports whether two configurations have the same effective
// values (a list left out equals an empty one) and name files with the
// same content (SinkFiles): a changed password or certificate file is a
// changed configuration.
func Equal(a, b *Config) bool {
	ta, ea := encode(printable(a))
	tb, eb := encode(printable(b))
	if ea != nil || eb != nil || ta != tb {
		return false
	}
	for i := range a.Sinks {
		if a.SinkFiles(&a.Sinks[i]) != b.SinkFiles(&b.Sinks[i]) {
			return false
		}
	}
	return true
}

func encode(v any) (string, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ofKind returns a copy of the struct v without the fields that are not
// keys of its kind (keyOfKind, read against v's kind field): a struct
// type of its own, made for the copy, with the same toml tags. Structs and
// lists of structs inside it are copied the same way (a list as []any, as
// its tables may differ).
func ofKind(v reflect.Value) reflect.Value {
	kind := ""
	if f := v.FieldByName("Kind"); f.IsValid() && f.Kind() == reflect.String {
		kind = f.String()
	}
	var fields []reflect.StructField
	var values []reflect.Value
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Tag.Get("toml") == "" || f.Tag.Get("toml") == "-" {
			continue
		}
		if !keyOfKind(v.Type(), f, kind) {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.Kind() == reflect.Struct && !reflect.PointerTo(fv.Type()).Implements(textMarshaler):
			fv = ofKind(fv)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			elems := make([]any, fv.Len())
			for j := range elems {
				elems[j] = ofKind(fv.Index(j)).Interface()
			}
			fv = reflect.ValueOf(elems)
		}
		fields = append(fields, reflect.StructField{Name: f.Name, Type: fv.Type(), Tag: reflect.StructTag(`toml:"` + f.Tag.Get("toml") + `"`)})
		values = append(values, fv)
	}
	out := reflect.New(reflect.StructOf(fields)).Elem()
	for i, fv := range values {
		out.Field(i).Set(fv)
	}
	return out
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// keyOfKind reports whether field f of struct type t is a key of kind: a
// source's are the kind's package's (kinds.go), besides name, kind and
// optional; another table's are those its kinds tag names, or every kind's
// when it has none.
func keyOfKind(t reflect.Type, f reflect.StructField, kind string) bool {
	if t == reflect.TypeFor[Source]() {
		switch key := f.Tag.Get("toml"); key {
		case "name", "kind", "optional":
			return true
		default:
			return isSourceKey(kind, key)
		}
	}
	if t == reflect.TypeFor[Sink]() {
		switch key := f.Tag.Get("toml"); key {
		case "name", "kind":
			return true
		default:
			return isSinkKey(kind, key)
		}
	}
	kinds := f.Tag.Get("kinds")
	return kinds == "" || slices.Contains(strings.Split(kinds, ","), kind)
}

// printable returns a copy of c as edged uses it, for printing and for
// comparing configurations: a list left out is written empty instead of
// being omitted (allow_uids, allow_gids, columns, sensors, labels, …), a
// model's reload is written as its effective value, and a socket mode in
// its canonical octal form. c is not changed.
func printable(c *Config) *Config {
	p := *c
	p.Sources = slices.Clone(c.Sources)
	p.Models = slices.Clone(c.Models)
	p.Pipelines = slices.Clone(c.Pipelines)
	p.Sinks = slices.Clone(c.Sinks)
	for i := range p.Models {
		on := p.Models[i].ReloadEnabled()
		p.Models[i].Reload = &on
	}
	for i := range p.Pipelines {
		p.Pipelines[i].Postprocess = slices.Clone(p.Pipelines[i].Postprocess)
	}
	for i := range p.Sinks {
		if m, err := ParseMode(p.Sinks[i].Mode); err == nil && p.Sinks[i].Mode != "" {
			p.Sinks[i].Mode = fmt.Sprintf("%04o", m)
		}
	}
	emptyLists(reflect.ValueOf(&p).Elem())
	return &p
}

// emptyLists replaces nil slices of scalars by empty ones in v, a struct,
// and in the structs it holds (the TOML encoder omits nil slices).
func emptyLists(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.Struct:
			emptyLists(f)
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Struct {
				for j := range f.Len() {
					emptyLists(f.Index(j))
				}
			} else if f.IsNil() {
				f.Set(reflect.MakeSlice(f.Type(), 0, 0))
			}
		}
	}
}
