package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
)

// Exit codes (a contract, see docs/ARCHITECTURE.md).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitConfig  = 78
)

type command struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"run", "run the daemon (the default when no subcommand is given)", cmdRun},
	{"check", "validate the configuration and probe devices and engine files", cmdCheck},
	{"tail", "print results from a running daemon's socket, serial port or capture file", cmdTail},
	{"reload", "ask a running daemon to re-check its engine files now", cmdReload},
	{"config", "config print: print the effective configuration with defaults", cmdConfig},
	{"demo-model", "write the built-in demo model (ONNX) to a file", cmdDemoModel},
	{"version", "print the version", cmdVersion},
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (len(args[0]) > 0 && args[0][0] == '-') {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			usage(stdout)
			return exitOK
		}
		return cmdRun(ctx, args, stdout, stderr)
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	if args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "edged: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "edged %s — edge inference daemon for NVIDIA Jetson\n\nUsage: edged <command> [flags]\n\nCommands:\n", edruntime.Version)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.usage)
	}
	fmt.Fprintf(w, "\nRun 'edged <command> -h' for a command's flags.\nExit status: 0 clean stop, 1 runtime failure, 78 bad configuration.\n")
}

// newFlags returns a flag set that reports errors on stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edged "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags; it returns an exit code when the command must stop.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return 0, true
}

// exitCode maps an error to the documented exit status.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, config.ErrInvalid):
		return exitConfig
	}
	return exitFailure
}
