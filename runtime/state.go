package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/edged-dev/edged/internal/atomicfile"
)

// stateDir resolves daemon.state_dir: the configured folder, else
// $STATE_DIRECTORY (systemd's StateDirectory=), else "" (no state kept).
func stateDir(c *Config) string {
	if c.Daemon.StateDir != "" {
		return c.Resolve(c.Daemon.StateDir)
	}
	if dir := os.Getenv("STATE_DIRECTORY"); dir != "" {
		// systemd may pass several, separated by colons; the first is ours.
		dir, _, _ = strings.Cut(dir, ":")
		return dir
	}
	return ""
}

// lastGood keeps, per model, a copy of the last model file that passed
// validation, under <state_dir>/last-good/. If the configured file cannot be
// used at start (a power cut in the middle of copying a new engine, a
// deleted file), the daemon serves the copy instead of refusing to start,
// and says so. Copies are written tmp+fsync+rename+dir fsync by one
// goroutine, so a power cut leaves the old copy or the new one, never a
// torn file.
type lastGood struct {
	root string // the state folder
	dir  string
	log  *slog.Logger

	cancel  context.CancelFunc // while started
	stopped chan struct{}

	mu      sync.Mutex
	pending map[string]saveJob // model name -> newest job
	wake    chan struct{}
	done    chan struct{}

	// Copies written and failed (disk full, read-only state folder): the
	// daemon keeps serving either way; edged_state_writes_total shows it.
	writes, writeErrors atomic.Uint64
	errs                rateLog
}

type saveJob struct {
	model, path string
	sha         [32]byte
}

func newLastGood(dir string, log *slog.Logger) *lastGood {
	return &lastGood{root: dir, dir: filepath.Join(dir, "last-good"), log: log, pending: map[string]saveJob{}, wake: make(chan struct{}, 1)}
}

// start runs the writer goroutine until stop.
func (l *lastGood) start() {
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.stopped = cancel, make(chan struct{})
	go func() { defer close(l.stopped); l.run(ctx) }()
}

// stop ends the writer goroutine (a copy being written is finished first)
// and waits for it.
func (l *lastGood) stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.stopped
	l.cancel = nil
}

// run writes copies until ctx is done.
func (l *lastGood) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		l.mu.Lock()
		jobs := l.pending
		l.pending = map[string]saveJob{}
		l.mu.Unlock()
		for _, j := range jobs {
			wrote, err := l.save(ctx, j)
			switch {
			case err != nil:
				l.writeErrors.Add(1)
				l.errs.log(l.log, "cannot keep a copy of the last good model; a broken file at the next start cannot fall back to it", "model", j.model, "dir", l.dir, "err", err)
			case wrote:
				l.writes.Add(1)
			}
		}
	}
}

// keep asks for a copy of the model file whose content has hash sha. The
// file is read again and copied only if it still has that content.
func (l *lastGood) keep(model, path string, sha [32]byte) {
	l.mu.Lock()
	l.pending[model] = saveJob{model: model, path: path, sha: sha}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *lastGood) file(model string) string { return filepath.Join(l.dir, model+".model") }

// save copies the job's file into the state folder; wrote is false when
// there was nothing to do (the file changed again, or the copy is current).
// What was kept before stays intact when it fails.
func (l *lastGood) save(ctx context.Context, j saveJob) (wrote bool, err error) {
	data, err := os.ReadFile(j.path)
	if err != nil {
		return false, err
	}
	if sha256.Sum256(data) != j.sha {
		return false, nil // the file changed again; its own reload will save it
	}
	dst := l.file(j.model)
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if failpoint(ctx, "state/write") {
		return false, fmt.Errorf("write %s: %w (failpoint state/write)", dst, syscall.ENOSPC)
	}
	if err := os.MkdirAll(l.dir, 0o750); err != nil {
		return false, err
	}
	if err := atomicfile.Write(dst, data, 0o600); err != nil {
		return false, err
	}
	return true, nil
}

// load returns the kept copy of a model, or an error wrapping
// os.ErrNotExist when there is none.
func (l *lastGood) load(model string) ([]byte, [32]byte, error) {
	data, err := os.ReadFile(l.file(model))
	if err != nil {
		return nil, [32]byte{}, err
	}
	return data, sha256.Sum256(data), nil
}

func shaPrefix(sum [32]byte) string { return hex.EncodeToString(sum[:6]) }
