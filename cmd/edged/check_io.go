package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
)

// checkSources opens what each source reads, as run opens it: a camera's
// device node (read and write, as V4L2 needs), a replay's recording or
// image folder, a serial sensor's port (started and stopped as run starts
// it). A missing device is a warning for an optional source (run waits
// for it) and a problem of the machine otherwise.
func checkSources(ctx context.Context, r *report, cfg *config.Config, valid bool) {
	for i := range cfg.Sources {
		sc := &cfg.Sources[i]
		if valid && fedByCamera(cfg, sc.Name) {
			// What run builds each camera a pipeline uses with (it opens
			// nothing; a replay reads its recording's header or its
			// folder's images): an error is the configuration's, as run's.
			src, err := newCamera(sc, cfg, jpeg.Options{})
			if err != nil {
				r.fail(exitConfig, "source %s: %v", sc.Name, err)
				continue
			}
			src.Close()
		}
		what, err := sc.Kind, error(nil)
		if k := sourceKinds[sc.Kind]; k.check != nil {
			what, err = k.check(ctx, sc, cfg)
		}
		switch {
		case err == nil:
			r.ok("source %s: %s", sc.Name, what)
		case errors.Is(err, config.ErrInvalid): // refused credentials
			r.fail(exitConfig, "source %s: %v", sc.Name, err)
		case sc.Optional:
			r.warn("source %s: %v (optional: edged waits for it)", sc.Name, err)
		default:
			r.fail(exitFailure, "source %s: %v", sc.Name, err)
		}
	}
}

// checkV4L2 opens a camera's device node as V4L2 needs it (read and
// write), and closes it.
func checkV4L2(_ context.Context, sc *config.Source, cfg *config.Config) (string, error) {
	what := devicePath(sc, cfg)
	return what, checkDevice(what)
}

// checkReplay reads a recording's header, or its folder's first image,
// for the size and format its frames have.
func checkReplay(_ context.Context, sc *config.Source, cfg *config.Config) (string, error) {
	pf, _ := sensors.ParsePixelFormat(sc.Format)
	f, _, err := replayFormat(cfg.Resolve(sc.Path), pf)
	if err != nil {
		return sc.Kind, err
	}
	return fmt.Sprintf("replay of %s: %dx%d %s", cfg.Resolve(sc.Path), f.Width, f.Height, f.Pixel), nil
}

// checkSerialSensor starts and stops a serial sensor as run starts it.
func checkSerialSensor(ctx context.Context, sc *config.Source, cfg *config.Config) (string, error) {
	what := devicePath(sc, cfg)
	if err := probeSensor(ctx, sc, cfg); err != nil {
		return what, errors.New(fromPath(err, what))
	}
	return what, nil
}

// probeSensor starts and stops a serial sensor as run starts it.
func probeSensor(ctx context.Context, sc *config.Source, cfg *config.Config) error {
	src, err := newSensor(sc, cfg)
	if err != nil {
		return err
	}
	defer src.Close()
	return src.Start(ctx)
}

// checkSinks makes, opens or connects to what each sink writes to, as run
// does, and undoes it (each kind's check, sinkKinds).
func checkSinks(ctx context.Context, r *report, cfg *config.Config) {
	for i := range cfg.Sinks {
		if k, ok := sinkKinds[cfg.Sinks[i].Kind]; ok {
			k.check(ctx, r, cfg, &cfg.Sinks[i])
		}
	}
}

// checkSerialSink opens the sink's port as run would, and closes it.
func checkSerialSink(_ context.Context, r *report, cfg *config.Config, s *config.Sink) {
	// run opens the port when it appears, and keeps results
	// queued meanwhile: not a problem.
	o := serialSinkOptions(s, cfg)
	if err := serialsink.Probe(o); err != nil {
		r.warn("sink %s: %s (edged opens it when it appears)", s.Name, fromPath(err, o.Device))
	} else {
		r.ok("sink %s: %s opened at %d baud", s.Name, o.Device, o.Baud)
	}
}

// fromPath is err's message from where it names path on, leaving out
// the prefixes of the packages it went through (a line of check names the
// source or sink already).
func fromPath(err error, path string) string {
	msg := err.Error()
	if i := strings.Index(msg, path); i >= 0 {
		return msg[i:]
	}
	return msg
}

// cause is err without the sink's own prefixes, for lines that name the
// sink and the device already: the innermost path error's cause, else err.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkSocketSink resolves the socket's path as run does, then: when a
// systemd socket unit installed here listens on that path and would hand
// it to this sink (runtime.InheritedName), edged under that unit creates
// nothing, and check says so; otherwise it makes the socket in its folder
// as this user and removes it (socketsink.Probe).
func checkSocketSink(_ context.Context, r *report, cfg *config.Config, s *config.Sink) {
	o, err := socketOptions(s, cfg)
	if err != nil {
		r.fail(exitConfig, "sink %s: %v", s.Name, err)
		return
	}
	if s.PathDefaulted() {
		r.note("sink %s: path not set: %s (the default: $XDG_RUNTIME_DIR/edged.sock, else edged.sock in the working folder)", s.Name, o.Path)
	}
	probe := socketsink.Probe(o)
	if u, ok := socketUnitFor(o.Path); ok {
		if _, handed := edruntime.InheritedName(cfg, s, []string{u.FDName}); handed {
			r.ok("sink %s: socket %s: made by systemd (ListenStream= of %s) and handed to edged under %s", s.Name, o.Path, u.File, u.Service)
			if probe != nil {
				r.note("outside systemd, edged run as %s could not make it: %v", userName(), probe)
			}
			return
		}
		r.note("sink %s: %s listens on %s, but hands it to this sink only if FileDescriptorName= is %q or it is the only socket sink", s.Name, u.File, o.Path, s.Name)
	}
	switch {
	case errors.Is(probe, socketsink.ErrInUse):
		// Most likely the running edged: said, not counted against
		// the configuration (run refuses to start beside it, exit 1).
		r.warn("sink %s: %v (edged itself, if it is running: run refuses to start beside it, exit 1)", s.Name, probe)
		return
	case probe != nil:
		// Classified as run classifies it (sinkError): a path edged may
		// not use, or a group that does not exist, is the configuration's.
		r.fail(exitCode(sinkError(s, probe)), "sink %s: %v", s.Name, probe)
		return
	}
	r.ok("sink %s: socket %s (made and removed again as %s)", s.Name, o.Path, userName())
}

// userName is this process's user as /etc/passwd names it, else "uid N".
// (Not os/user: with cgo it asks nscd over its socket, a connection
// check has no need to make.)
func userName() string {
	uid := strconv.Itoa(os.Getuid())
	if data, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Split(line, ":"); len(f) > 2 && f[2] == uid {
				return f[0]
			}
		}
	}
	return "uid " + uid
}

// checkMQTTSink connects to the broker once, as the sink would (its URL,
// TLS settings, user name and password file), and disconnects. Refused
// credentials and a failed TLS handshake are problems of the
// configuration; a broker that cannot be reached now is a warning: the
// pipeline never waits for it, and records are queued until it answers.
func checkMQTTSink(ctx context.Context, r *report, cfg *config.Config, s *config.Sink) {
	o, err := mqttOptions(s, cfg)
	if err != nil {
		r.fail(exitConfig, "sink %s: %v", s.Name, err)
		return
	}
	start := time.Now()
	err = mqttsink.Probe(ctx, o)
	who := "anonymously"
	if o.Username != "" {
		who = "as " + o.Username
	}
	switch {
	case err == nil:
		how := ""
		if o.URL.Scheme == "mqtts" {
			how = ", TLS verified"
		}
		r.ok("sink %s: %s accepted a connection %s%s in %s", s.Name, o.URL.Redacted(), who, how, time.Since(start).Round(time.Millisecond))
	case errors.Is(err, mqttsink.ErrAuth):
		r.fail(exitConfig, "sink %s: %s refused the credentials (username %q, password_file): %v", s.Name, o.URL.Redacted(), o.Username, err)
	case errors.Is(err, mqttsink.ErrTLS):
		r.fail(exitConfig, "sink %s: %s: TLS handshake failed (is the broker's certificate signed by ca_file, and for its host name?): %v", s.Name, o.URL.Redacted(), err)
	default:
		queue := "in memory"
		if o.Dir != "" {
			queue = "in " + o.Dir
		}
		r.warn("sink %s: %s cannot be reached now (%v); edged run starts anyway and queues records %s until it connects", s.Name, o.URL.Redacted(), err, queue)
	}
}

// checkState says where the state folder is (daemon.state_dir, else
// $STATE_DIRECTORY) and that this user can write there, as run does for
// last-good model copies and MQTT queues.
func checkState(r *report, cfg *config.Config) {
	mqtt := false
	for _, s := range cfg.Sinks {
		mqtt = mqtt || s.Kind == mqttsink.Kind
	}
	dir := edruntime.StateDir(cfg)
	if dir == "" {
		if mqtt {
			r.warn("no state folder (daemon.state_dir, or systemd's StateDirectory=): no last-good model copies, and MQTT queues are kept in memory only, lost on restart")
		} else {
			r.note("no state folder (daemon.state_dir, or systemd's StateDirectory=): no last-good model copies")
		}
		return
	}
	if err := probeWritable(dir); err != nil {
		r.warn("state folder %s: %v: edged run keeps no last-good model copies there and MQTT queues in memory only", dir, err)
		return
	}
	r.ok("state folder %s: writable as %s (last-good model copies, MQTT queues)", dir, userName())
}

// probeWritable makes dir (and its missing parents) and a file in it as
// this user, then removes what it made.
func probeWritable(dir string) error {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	defer func() {
		for _, d := range made {
			os.Remove(d)
		}
	}()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return cause(err)
	}
	f, err := os.CreateTemp(dir, ".edged-check-")
	if err != nil {
		return cause(err)
	}
	f.Close()
	return os.Remove(f.Name())
}
