package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/edged-dev/edged/trt/demomodel"
)

func main() {
	out := flag.String("o", "demo.onnx", "output `file`")
	variant := flag.Int("variant", 0, "class permutation `n` (0..7); 0 is the built-in model")
	flag.Parse()
	b, err := demomodel.Build(demomodel.Options{Permutation: *variant})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if old, err := os.ReadFile(*out); err == nil && bytes.Equal(old, b) {
		return
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
