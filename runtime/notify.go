package runtime

import (
	"fmt"
	"strings"
	"sync"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends service state to the service manager (sd_notify). The
// states are the sd_notify(3) assignments, e.g. "READY=1" or
// "STATUS=running".
type Notifier interface {
	Notify(state string) error
}

// SystemdNotifier talks to systemd through $NOTIFY_SOCKET; without it,
// Notify does nothing.
type SystemdNotifier struct{}

// Notify implements Notifier.
func (SystemdNotifier) Notify(state string) error {
	_, err := sddaemon.SdNotify(false, state)
	return err
}

// WatchdogInterval returns the interval at which WATCHDOG=1 must be sent
// ($WATCHDOG_USEC), or 0 when the watchdog is off.
func WatchdogInterval() time.Duration {
	d, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}

// notifier wraps a Notifier: it de-duplicates STATUS lines and remembers
// the first error instead of failing the daemon (the service manager being
// unreachable must not stop inference).
type notifier struct {
	n          Notifier
	mu         sync.Mutex
	lastStatus string
	err        error
}

func (s *notifier) send(states ...string) {
	if s.n == nil {
		return
	}
	msg := strings.Join(states, "\n")
	if err := s.n.Notify(msg); err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = fmt.Errorf("sd_notify: %w", err)
		}
		s.mu.Unlock()
	}
}

func (s *notifier) status(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	line = strings.ReplaceAll(line, "\n", " ")
	s.mu.Lock()
	same := line == s.lastStatus
	s.lastStatus = line
	s.mu.Unlock()
	if !same {
		s.send("STATUS=" + line)
	}
}

// ready sends READY=1 together with the status line that says why.
func (s *notifier) ready(status string) {
	status = strings.ReplaceAll(status, "\n", " ")
	s.mu.Lock()
	s.lastStatus = status
	s.mu.Unlock()
	s.send("READY=1", "STATUS="+status)
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, for MONOTONIC_USEC=.
func monotonicUsec() string {
	return fmt.Sprintf("MONOTONIC_USEC=%d", monoNow()/1000)
}
