package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/edged-dev/edged/configs"
	edruntime "github.com/edged-dev/edged/runtime"
)

// loadConfig loads -config, $EDGED_CONFIG, or the embedded default. The
// second result names what was loaded, for messages.
func loadConfig(path string) (*edruntime.Config, string, error) {
	if path == "" {
		path = os.Getenv("EDGED_CONFIG")
	}
	if path == "" {
		cfg, err := edruntime.Parse("", configs.Default)
		return cfg, "embedded default configuration", err
	}
	cfg, err := edruntime.LoadFile(path)
	if err == nil {
		err = cfg.CheckFiles()
	}
	return cfg, path, err
}

func cmdConfig(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "print" {
		fmt.Fprintln(stderr, "usage: edged config print [-config FILE]")
		return exitUsage
	}
	fs := newFlags("config print", stderr)
	path := fs.String("config", "", "configuration file (default: $EDGED_CONFIG, else the embedded default)")
	if code, ok := parse(fs, args[1:]); !ok {
		return code
	}
	cfg, what, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintf(stderr, "edged: %s:\n%v\n", what, err)
		return exitCode(err)
	}
	text, err := edruntime.EncodeConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "edged: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "# effective configuration from %s (defaults filled in)\n%s", what, text)
	return exitOK
}
