package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os/user"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/socketsink"
)

// An exit status says who must act (docs/OPERATIONS.md): 78 when a person
// must change something — the configuration, a file it names, the
// machine's set-up — and 1 when the machine may get there by itself — a
// device that is missing now, memory in use, another process on the
// socket. The errors of starting a part carry config.ErrInvalid when they
// are a person's to fix, so that run's exit status (exitCode) and check's
// verdict come from the same judgement.

// sinkError classifies an error of making sink s. A socket path that is
// taken by another kind of file, too long for a socket, in a folder that
// does not exist or that edged may not write, or a group that does not
// exist, is the configuration's (78); another process listening there is
// the machine's now (1). Every error of making an MQTT sink is the
// configuration's: its URL, files and TLS material are read and checked
// when it is made, and the broker only when it connects.
func sinkError(s *config.Sink, err error) error {
	if err == nil || errors.Is(err, config.ErrInvalid) {
		return err
	}
	var unknownGroup user.UnknownGroupError
	switch {
	case s.Kind == mqttsink.Kind,
		errors.Is(err, socketsink.ErrNotSocket), errors.Is(err, socketsink.ErrSocketPath), errors.Is(err, socketsink.ErrNoFolder), errors.As(err, &unknownGroup),
		errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	return err
}
