package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"

	"github.com/BurntSushi/toml"
)

// Encode renders the effective configuration (defaults filled in) as
// TOML, every key written with the value in force (edged config print).
func Encode(c *Config) (string, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(printable(c)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Equal reports whether two configurations have the same effective
// values (a list left out equals an empty one).
func Equal(a, b *Config) bool {
	ta, ea := Encode(a)
	tb, eb := Encode(b)
	return ea == nil && eb == nil && ta == tb
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
