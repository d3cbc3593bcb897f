package config

import (
	"fmt"
	"reflect"

	"github.com/edged-dev/edged/internal/confkeys"
)

// The [[sink]] tables: each kind's package declares its keys (their
// defaults and checks), what a sink of the kind holds, whether it listens
// and the files it names (confkeys.SinkKind); the binary registers the
// kinds it has (cmd/edged/kinds.go). The configuration names none of them:
// a [[sink]] table is decoded into Sink (every key of every kind), then
// its kind's keys are filled and checked, as a source's are (kinds.go).

// sinkKinds are the registered sink kinds, in the order messages list
// them.
var sinkKinds []sinkKind

type sinkKind struct {
	confkeys.SinkKind
	fields [][2][]int
	own    map[string]bool
	files  [][]int // the fields of Files' keys in Sink
}

// RegisterSinkKinds makes the kinds known to the configuration, in the
// order they are listed in messages. It is called before any
// configuration is parsed (at init); a kind registered twice, or one with a
// key that Sink does not have with the same type (or a file key that is
// not one of its string keys), panics.
func RegisterSinkKinds(kinds ...confkeys.SinkKind) {
	st := reflect.TypeFor[Sink]()
	for _, k := range kinds {
		if _, dup := findSinkKind(k.Name); dup {
			panic(fmt.Sprintf("config: sink kind %q registered twice", k.Name))
		}
		fields, own := mapKeys("sink", k.Name, k.New(), st)
		sk := sinkKind{SinkKind: k, fields: fields, own: own}
		all := keyFields(st)
		for _, f := range k.Files {
			if !own[f.Key] || st.FieldByIndex(all[f.Key].index).Type.Kind() != reflect.String {
				panic(fmt.Sprintf("config: sink kind %q names file key %q, which is not one of its string keys", k.Name, f.Key))
			}
			sk.files = append(sk.files, all[f.Key].index)
		}
		sinkKinds = append(sinkKinds, sk)
	}
}

func findSinkKind(name string) (*sinkKind, bool) {
	for i := range sinkKinds {
		if sinkKinds[i].Name == name {
			return &sinkKinds[i], true
		}
	}
	return nil, false
}

// isSinkKey reports whether key is one of kind's keys; of a kind not
// registered (or none), whether it is every kind's (format), as config
// print shows such a table as far as it was understood.
func isSinkKey(kind, key string) bool {
	if k, ok := findSinkKind(kind); ok {
		return k.own[key]
	}
	for _, k := range sinkKinds {
		if !k.own[key] {
			return false
		}
	}
	return len(sinkKinds) > 0
}

// SinkKindNames lists the registered sink kinds, in order.
func SinkKindNames() []string {
	names := make([]string, len(sinkKinds))
	for i, k := range sinkKinds {
		names[i] = k.Name
	}
	return names
}

// keys returns s's keys as its kind's package declares them.
func (k *sinkKind) keys(s *Sink) confkeys.Keys {
	keys := k.New()
	loadKeys(k.fields, keys, s)
	return keys
}

// defaults fills a [[sink]] table by its kind, and notes whether its path
// is one the kind filled in (PathDefaulted).
func (s *Sink) defaults() {
	k, ok := findSinkKind(s.Kind)
	if !ok {
		return
	}
	empty := s.Path == ""
	keys := k.keys(s)
	keys.Defaults()
	storeKeys(k.fields, keys, s)
	s.pathDefaulted = empty && s.Path != ""
}

// Holds names what sink s of c holds exclusively, so that a reload builds
// a sink that takes it over only after the one holding it stopped (its
// kind says what: a socket's path, a serial device, an MQTT queue folder
// and client id by the sink's name).
func (s *Sink) Holds(c *Config) string {
	if k, ok := findSinkKind(s.Kind); ok && k.Holds != nil {
		return k.Holds(s.Name, k.keys(s), c.Resolve)
	}
	return s.Kind + " " + s.Name // unknown kinds: only their own replacement waits
}

// Listens reports whether s listens on a Unix socket, which systemd's
// socket activation may pass it (its kind says so).
func (s *Sink) Listens() bool {
	k, ok := findSinkKind(s.Kind)
	return ok && k.SinkKind.Listens
}

func (c *Config) checkSink(k *checker, i int) {
	s := &c.Sinks[i]
	at := func(key string) string { return fmt.Sprintf("sink[%d].%s", i, key) }
	switch kind, ok := findSinkKind(s.Kind); {
	case ok:
		kind.keys(s).Check(problemsAt{k, at})
	case s.Kind == "":
		k.add(fmt.Sprintf("sink[%d]", i), "missing kind (%s)", kindList(SinkKindNames(), true, " or "))
	default:
		k.add(at("kind"), "%q is not one of %s", s.Kind, kindList(SinkKindNames(), true, ", "))
	}
}
