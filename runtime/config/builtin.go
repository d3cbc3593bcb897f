package config

import (
	"fmt"
	"sort"

	"github.com/edged-dev/edged/trt/demomodel"
)

// builtinModels are the models compiled into edged, selected with
// path = "builtin:NAME".
var builtinModels = map[string]func() []byte{
	"demo": func() []byte { return demomodel.Default },
}

// BuiltinModels lists the names of the built-in models.
func BuiltinModels() []string {
	n := make([]string, 0, len(builtinModels))
	for k := range builtinModels {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// BuiltinModel returns the bytes of a built-in model.
func BuiltinModel(name string) ([]byte, error) {
	f, ok := builtinModels[name]
	if !ok {
		return nil, fmt.Errorf("no built-in model %q", name)
	}
	return f(), nil
}
