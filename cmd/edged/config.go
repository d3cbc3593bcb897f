package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
)

// loadConfig loads -config, $EDGED_CONFIG, or the embedded default, and
// checks that its model files are there. The second result names what was
// loaded, for messages. On error the configuration is nil when the file
// could not be read as TOML; otherwise it is what Parse understood, and
// the error lists every problem of the file and of its model files.
func loadConfig(path string) (*config.Config, string, error) {
	cfg, what, err := parseConfig(path)
	if cfg != nil {
		if ferr := cfg.CheckFiles(); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return cfg, what, err
}

// parseConfig is loadConfig without the model files.
func parseConfig(path string) (*config.Config, string, error) {
	if path == "" {
		path = os.Getenv("EDGED_CONFIG")
	}
	if path == "" {
		cfg, err := config.Parse("", configs.Default)
		return cfg, "embedded default configuration", err
	}
	cfg, err := config.LoadFile(path)
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
	// What the machine lacks (a model file, a password file) does not
	// keep the configuration from being shown: it is said after it. A
	// configuration with problems is shown as far as it was understood,
	// and exits 78.
	cfg, what, err := parseConfig(*path)
	if cfg == nil { // not TOML
		fmt.Fprintf(stderr, "edged: %s:\n%v\n", what, err)
		return exitCode(err)
	}
	text, eerr := config.Encode(cfg)
	if eerr != nil {
		fmt.Fprintf(stderr, "edged: %v\n", eerr)
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(stdout, "# configuration from %s, NOT VALID (the problems are listed on stderr): what edged understood of it, defaults filled in\n%s", what, text)
		fmt.Fprintf(stderr, "edged: %s:\n%v\n", what, err)
		return exitCode(err)
	}
	fmt.Fprintf(stdout, "# effective configuration from %s (defaults filled in)\n%s", what, text)
	if ferr := cfg.CheckFiles(); ferr != nil {
		fmt.Fprintf(stderr, "edged config print: warning: on this machine edged run and edged check would refuse %s:\n%v\n", what, ferr)
	}
	return exitOK
}
