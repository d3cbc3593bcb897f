package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"

	"github.com/edged-dev/edged/internal/atomicfile"
	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/trt/demomodel"
)

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	fmt.Fprintf(stdout, "edged %s (%s, %s/%s)\n", edruntime.Version, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
	return exitOK
}

func cmdDemoModel(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo-model", stderr)
	out := fs.String("o", "", "output file (required), e.g. models/demo.onnx")
	variant := fs.Int("variant", 0, "0 = the built-in model; 1..7 = a model whose class output is permuted by N (for watching a hot reload)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *out == "" {
		fmt.Fprintln(stderr, "edged demo-model: -o FILE is required")
		return exitUsage
	}
	if *variant < 0 || *variant > 7 {
		fmt.Fprintln(stderr, "edged demo-model: -variant must be between 0 and 7")
		return exitUsage
	}
	data, err := demomodel.Variant(*variant)
	if err != nil {
		fmt.Fprintf(stderr, "edged demo-model: %v\n", err)
		return exitFailure
	}
	// Write next to the target and rename, so a daemon watching the folder
	// never sees a partial file.
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintf(stderr, "edged demo-model: %v\n", err)
		return exitFailure
	}
	// A temporary of an earlier run that was killed while writing.
	atomicfile.RemoveStale(filepath.Dir(*out), filepath.Base(*out))
	if err := atomicfile.Write(*out, data, 0o644); err != nil {
		fmt.Fprintf(stderr, "edged demo-model: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes, variant %d)\n", *out, len(data), *variant)
	return exitOK
}
