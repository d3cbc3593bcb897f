package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/trt/onnx"
)

func cmdRun(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	path := fs.String("config", "", "configuration file (default: $EDGED_CONFIG, else the embedded default)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	// Signals first: a SIGTERM (systemctl stop) or SIGHUP (systemctl
	// reload) that came while the configuration is read, libraries load or
	// systemctl is asked about the unit took the default action and killed
	// edged by the signal. SIGTERM now stops a start at any point (exit 0);
	// a SIGHUP is kept (one) and applied once the daemon runs.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	cfg, what, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintf(stderr, "edged: %s:\n%v\n", what, err)
		return exitCode(err)
	}
	log := newLogger(cfg.Daemon, stderr)
	log.Info("edged starting", "version", edruntime.Version, "config", what, "pid", os.Getpid())
	if cfg.File == "" {
		for _, s := range cfg.Sinks {
			if s.Kind == socketsink.Kind {
				log.Info("no configuration file given: running the embedded default (synthetic camera, built-in demo model on ONNX Runtime, results on a Unix socket)",
					"socket", s.Path, "try", "edged tail -socket "+s.Path)
			}
		}
	}

	preloadLibraries(cfg, log)
	warnIPFilter(ctx, cfg, log)

	listeners, err := inheritedListeners()
	if err != nil {
		log.Error("socket activation", "err", err)
		return exitFailure
	}
	d, err := edruntime.New(edruntime.Options{
		Config:           cfg,
		Factories:        factories(log),
		Logger:           log,
		Notifier:         edruntime.SystemdNotifier{},
		Listeners:        listeners,
		WatchdogInterval: edruntime.WatchdogInterval(),
	})
	if err != nil {
		log.Error("edged cannot start", "err", err)
		return exitCode(err)
	}

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reloadOnHUP(ctx, d, *path, log)
			}
		}
	}()

	if err := d.Run(ctx); err != nil {
		// Positioned problems, one a line, as for an invalid file.
		var me *edruntime.MemoryError
		if errors.As(err, &me) {
			fmt.Fprintf(stderr, "edged: %s: frame pools and engines do not fit in memory:\n%v\n", what, me)
			return exitCode(err)
		}
		var ce *config.Error
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "edged: %s: the pipelines do not fit their models:\n%v\n", what, ce)
			return exitCode(err)
		}
		log.Error("edged failed", "err", err)
		return exitCode(err)
	}
	return exitOK
}

// reloadOnHUP re-reads the configuration. An invalid file is reported and
// the running configuration kept; engines are re-checked either way.
func reloadOnHUP(ctx context.Context, d *edruntime.Daemon, path string, log *slog.Logger) {
	cfg, what, err := loadConfig(path)
	if err != nil {
		log.Error("SIGHUP: new configuration rejected; keeping the running one", "config", what, "err", err)
		d.ConfigRejected(what, err)
		d.ReloadEngines()
		return
	}
	log.Info("SIGHUP: reloading", "config", what)
	if err := d.Reload(ctx, cfg); err != nil {
		log.Error("reload failed", "err", err)
	}
}

// inheritedListeners returns systemd socket-activated listeners by their
// FileDescriptorName (LISTEN_FDNAMES).
func inheritedListeners() (map[string]net.Listener, error) {
	byName := socketsink.InheritedListeners()
	out := map[string]net.Listener{}
	for name, ls := range byName {
		for _, l := range ls {
			if l != nil {
				out[name] = l
				break
			}
		}
	}
	return out, nil
}

func newLogger(d config.Daemon, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(d.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if d.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// preloadLibraries loads ONNX Runtime, when a model will need it, and
// libjpeg-turbo, when a camera may deliver MJPEG, while
// the process has nothing else running: before the daemon starts its
// goroutines. glibc before 2.34 (JetPack 5 is Ubuntu 20.04, glibc 2.31) has
// a race between dlopen of a library with thread-local storage and a
// thread being created at the same moment (sourceware bug 19329: the
// assertion "_dl_allocate_tls_init: ... dl_tls_generation" aborts the
// process). Go creates threads whenever goroutines need them, so a
// library loaded while pipelines and sinks start can hit it; CI hit it
// under qemu. Loaded here, no other goroutine wants a thread. A failure is
// not reported here: the model load reports it where it belongs.
func preloadLibraries(cfg *config.Config, log *slog.Logger) {
	for i := range cfg.Models {
		if bn, err := config.ModelBackend(&cfg.Models[i]); err == nil && bn == "onnx" {
			if _, err := onnx.New(onnx.Options{Library: cfg.Resolve(cfg.Daemon.OnnxRuntimeLib)}); err != nil {
				log.Debug("ONNX Runtime not preloaded", "err", err)
			}
			break
		}
	}
	for _, s := range cfg.Sources {
		// A replay file says its format only when opened.
		if s.Format == "MJPEG" || s.Format == "MJPG" || s.Kind == replay.Kind {
			if d, err := jpeg.New(jpeg.Options{Backend: jpeg.TurboJPEG}); err == nil {
				d.Close() // the library stays loaded
			}
			return
		}
	}
}
