package runtime

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/edged-dev/edged/internal/atomicfile"
	"github.com/edged-dev/edged/internal/regfile"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/trt"
)

// StateDir is where edged keeps state: daemon.state_dir, else
// $STATE_DIRECTORY, else "" (none).
func StateDir(c *config.Config) string { return stateDir(c) }

// stateDir resolves daemon.state_dir: the configured folder, else
// $STATE_DIRECTORY (systemd's StateDirectory=), else "" (no state kept).
func stateDir(c *config.Config) string {
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
// validation, under <state_dir>/last-good/<model>.model. If the configured
// file cannot be used at start (a power cut in the middle of copying a new
// engine, a deleted file), the daemon serves the copy instead of refusing to
// start, and says so. Copies are written tmp+fsync+rename+dir fsync by one
// goroutine, so a power cut leaves the old copy or the new one, never a
// torn file.
//
// A copy records the model and the model file it was made for, with its
// size and SHA-256 (see lastGoodMagic); it is served only for that model
// and that file, and only when its content still has that hash. A model
// name that is not a plain file name (see checkModelName) gets no copy.
type lastGood struct {
	root     string // the state folder
	dir      string
	log      *slog.Logger
	maxBytes int64 // the largest model file copied or served

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

// A copy is lastGoodMagic, one line of JSON (lastGoodHeader), then the
// model file's bytes.
const lastGoodMagic = "edged-last-good 1\n"

// maxHeader bounds the JSON line of a copy (a model name and a path).
const maxHeader = 16 << 10

type lastGoodHeader struct {
	Model  string `json:"model"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// newLastGood keeps copies in dir/last-good of model files up to maxBytes
// (daemon.max_model_bytes; 0 means trt.DefaultMaxBytes).
func newLastGood(dir string, log *slog.Logger, maxBytes int64) *lastGood {
	if maxBytes <= 0 {
		maxBytes = trt.DefaultMaxBytes
	}
	return &lastGood{root: dir, dir: filepath.Join(dir, "last-good"), log: log, maxBytes: maxBytes, pending: map[string]saveJob{}, wake: make(chan struct{}, 1)}
}

// start runs the writer goroutine until stop, after removing the
// temporaries a killed edged left in the folder.
func (l *lastGood) start() {
	if l.cancel != nil {
		return
	}
	if dir, err := l.open(false); err == nil {
		if gone, _ := atomicfile.RemoveStaleIn(dir); len(gone) > 0 {
			l.log.Info("removed temporaries left by an edged stopped while writing a last-good copy", "dir", l.dir, "files", gone)
		}
		dir.Close()
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

// file is where the copy of model is kept, for messages; path checks it.
func (l *lastGood) file(model string) string { return filepath.Join(l.dir, model+".model") }

// path returns the copy's file for model, refusing a name that is not a
// plain file name: the configuration check refuses such names too, this
// is the second line of defence for a Config built in code.
func (l *lastGood) path(model string) (string, error) {
	if err := config.CheckModelName(model); err != nil {
		return "", fmt.Errorf("no last-good copy for this model: %w", err)
	}
	p := l.file(model)
	if filepath.Dir(p) != filepath.Clean(l.dir) {
		return "", fmt.Errorf("no last-good copy for model %q: %s is not in %s", model, p, l.dir)
	}
	return p, nil
}

// open opens last-good/ inside the state folder (creating both when
// create is set) as an os.Root: nothing read or written there, and not
// the folder itself, may lead out of the state folder through a symbolic
// link.
func (l *lastGood) open(create bool) (*os.Root, error) {
	if create {
		if err := os.MkdirAll(l.root, 0o750); err != nil {
			return nil, err
		}
	}
	state, err := os.OpenRoot(l.root)
	if err != nil {
		return nil, err
	}
	defer state.Close()
	if create {
		if err := state.MkdirAll("last-good", 0o750); err != nil {
			return nil, outsideState(err, l.dir, l.root)
		}
	}
	dir, err := state.OpenRoot("last-good")
	return dir, outsideState(err, l.dir, l.root)
}

// outsideState names the refusal of a path a symbolic link leads out of
// the state folder.
func outsideState(err error, path, root string) error {
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return fmt.Errorf("%s leads out of the state folder %s (a symbolic link?); edged reads and writes only inside it: %w", path, root, err)
	}
	return err
}

// absPath is the model file's path as a copy records it.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// save copies the job's file into the state folder; wrote is false when
// there was nothing to do (the file changed again, or the copy is current).
// What was kept before stays intact when it fails.
func (l *lastGood) save(ctx context.Context, j saveJob) (wrote bool, err error) {
	dst, err := l.path(j.model)
	if err != nil {
		return false, err
	}
	hdr := lastGoodHeader{Model: j.model, Path: absPath(j.path), SHA256: hex.EncodeToString(j.sha[:])}
	dir, err := l.open(true)
	if err != nil {
		return false, err
	}
	defer dir.Close()
	if l.current(dir, dst, hdr) {
		return false, nil
	}
	f, st, err := regfile.Open(j.path, regfile.NoLimit)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if hdr.Size = st.Size(); hdr.Size > l.maxBytes {
		return false, fmt.Errorf("%s is %d bytes, more than the %d-byte model file limit", j.path, hdr.Size, l.maxBytes)
	}
	line, err := json.Marshal(hdr)
	if err != nil {
		return false, err
	}
	head := len(lastGoodMagic) + len(line) + 1
	buf := make([]byte, head+int(hdr.Size))
	defer func() {
		// Hand a large read back to the system now rather than at a
		// garbage collection minutes away (on a Jetson it is GPU memory).
		large := len(buf) >= 16<<20
		buf = nil
		if large {
			debug.FreeOSMemory()
		}
	}()
	copy(buf, lastGoodMagic)
	copy(buf[len(lastGoodMagic):], line)
	buf[head-1] = '\n'
	if _, err := io.ReadFull(f, buf[head:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return false, nil // shorter than it was: the file changed again
		}
		return false, err
	}
	if sha256.Sum256(buf[head:]) != j.sha {
		return false, nil // the file changed again; its own reload will save it
	}
	if failpoint(ctx, "state/write") {
		return false, fmt.Errorf("write %s: %w (failpoint state/write)", dst, syscall.ENOSPC)
	}
	if err := atomicfile.WriteIn(dir, filepath.Base(dst), buf, 0o600); err != nil {
		return false, err
	}
	return true, nil
}

// current reports whether the copy at p already holds want's model, file
// and content (hashed as it streams by, not read into memory).
func (l *lastGood) current(dir *os.Root, p string, want lastGoodHeader) bool {
	f, _, err := regfile.OpenIn(dir, filepath.Base(p), regfile.NoLimit)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	h, _, err := readHeader(r, p)
	if err != nil || h.Model != want.Model || h.Path != want.Path || h.SHA256 != want.SHA256 {
		return false
	}
	sum := sha256.New()
	n, err := io.Copy(sum, r)
	return err == nil && n == h.Size && hex.EncodeToString(sum.Sum(nil)) == want.SHA256
}

// readHeader reads the magic and the header line; n is their length.
func readHeader(r *bufio.Reader, p string) (h lastGoodHeader, n int, err error) {
	magic := make([]byte, len(lastGoodMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != lastGoodMagic {
		return h, 0, fmt.Errorf("%s is not a last-good copy written by this edged (no %q header; it is not served: a copy that does not say which model it holds could be another one)", p, strings.TrimSpace(lastGoodMagic))
	}
	var line []byte
	for len(line) <= maxHeader {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return h, 0, fmt.Errorf("%s: header line: %w", p, err)
		}
	}
	if len(line) > maxHeader {
		return h, 0, fmt.Errorf("%s: header line longer than %d bytes", p, maxHeader)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, 0, fmt.Errorf("%s: header line: %w", p, err)
	}
	return h, len(magic) + len(line), nil
}

// load returns the kept copy of the model file path of model, or an error
// wrapping os.ErrNotExist when there is none. A copy made for another
// model or another file, or whose content no longer has the recorded hash,
// is refused.
func (l *lastGood) load(model, path string) ([]byte, [32]byte, error) {
	p, err := l.path(model)
	if err != nil {
		return nil, [32]byte{}, err
	}
	dir, err := l.open(false)
	if err != nil {
		return nil, [32]byte{}, err
	}
	defer dir.Close()
	f, st, err := regfile.OpenIn(dir, filepath.Base(p), regfile.NoLimit)
	if err != nil {
		return nil, [32]byte{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 4096)
	h, _, err := readHeader(r, p)
	if err != nil {
		return nil, [32]byte{}, err
	}
	if h.Model != model || h.Path != absPath(path) {
		return nil, [32]byte{}, fmt.Errorf("%s holds the last good version of model %q from %s, not of model %q from %s; it is not served", p, h.Model, h.Path, model, absPath(path))
	}
	if h.Size < 0 || h.Size > l.maxBytes {
		return nil, [32]byte{}, fmt.Errorf("%s: the copy is %d bytes, more than the %d-byte model file limit", p, h.Size, l.maxBytes)
	}
	// The size the header declares is allocated: not more than the file
	// holds (a damaged header would otherwise cost up to max_model_bytes).
	if h.Size > st.Size() {
		return nil, [32]byte{}, fmt.Errorf("%s: the copy's header records %d bytes, but the file holds %d", p, h.Size, st.Size())
	}
	data := make([]byte, h.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, [32]byte{}, fmt.Errorf("%s: the copy is shorter than the %d bytes its header records: %w", p, h.Size, err)
	}
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		return nil, [32]byte{}, fmt.Errorf("%s: the copy is longer than the %d bytes its header records", p, h.Size)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != h.SHA256 {
		return nil, [32]byte{}, fmt.Errorf("%s: the copy's content does not have the SHA-256 its header records (%.12s…); it is not served", p, h.SHA256)
	}
	return data, sum, nil
}

func shaPrefix(sum [32]byte) string { return hex.EncodeToString(sum[:6]) }
