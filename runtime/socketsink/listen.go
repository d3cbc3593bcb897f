package socketsink

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/edged-dev/edged/internal/atomicfile"
)

// Socket set-up errors.
var (
	// ErrInUse means another process answers on the socket path.
	ErrInUse = errors.New("stream: socket in use")
	// ErrNotSocket means the socket path exists and is not a socket.
	ErrNotSocket = errors.New("stream: path exists and is not a socket")
	// ErrNoFolder means the socket path's folder does not exist (or is
	// not a folder): edged creates no folder outside its own.
	ErrNoFolder = errors.New("stream: no folder for the socket")
	// ErrSocketPath means the socket path cannot hold a Unix socket
	// (empty, or longer than a socket address allows).
	ErrSocketPath = errors.New("stream: unusable socket path")
)

func checkPathLength(path string) error {
	if path == "" {
		return fmt.Errorf("%w: the socket path is empty (set path in the [[sink]])", ErrSocketPath)
	}
	if len(path) > maxSocketPath {
		return fmt.Errorf("%w: socket path %s is %d bytes, longer than the %d a Unix socket allows; choose a shorter path", ErrSocketPath, path, len(path), maxSocketPath)
	}
	// listenUnix binds in a temporary folder beside path first:
	// dir/.edged-<up to 10 digits>/s.
	if n := len(filepath.Dir(path)) + len("/.edged-/s") + 10; n > maxSocketPath {
		return fmt.Errorf("%w: socket path %s is too long to bind safely (the temporary name beside it would be up to %d bytes, more than %d); choose a shorter path", ErrSocketPath, path, n, maxSocketPath)
	}
	return nil
}

// maxSocketPath is the longest path a Unix socket address can hold on
// Linux (sun_path is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// fileID identifies the socket file this process created, so Close removes
// it only while it is still ours.
type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Mode()&fs.ModeSocket == 0 {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

// resolveGroup turns a group name or numeric gid into a gid; "" gives -1
// (leave the group alone).
func resolveGroup(g string) (int, error) {
	if g == "" {
		return -1, nil
	}
	if n, err := strconv.ParseUint(g, 10, 32); err == nil {
		return int(n), nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return 0, fmt.Errorf("stream: socket group %q: %w (create the group, e.g. with systemd-sysusers, or give a numeric gid)", g, err)
	}
	n, err := strconv.Atoi(grp.Gid)
	if err != nil {
		return 0, fmt.Errorf("stream: socket group %q has a non-numeric gid %q", g, grp.Gid)
	}
	return n, nil
}

// listenUnix binds a Unix stream socket at path whose mode and group are
// right from the moment the path exists: it binds inside a fresh 0700
// directory next to path, sets mode and group there, and renames the socket
// into place. A stale socket file (nobody answers) is replaced by that
// rename; a live one is refused with ErrInUse.
func listenUnix(path string, mode os.FileMode, gid int) (*net.UnixListener, fileID, error) {
	if err := checkPathLength(path); err != nil {
		return nil, fileID{}, err
	}
	if err := checkFolder(path, filepath.Dir(path)); err != nil {
		return nil, fileID{}, err
	}
	if err := checkStale(path); err != nil {
		return nil, fileID{}, err
	}
	ln, tmp, release, err := bindPrivate(path, mode, gid)
	if err != nil {
		return nil, fileID{}, err
	}
	defer release()
	fail := func(err error) (*net.UnixListener, fileID, error) {
		ln.Close()
		return nil, fileID{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("stream: socket %s: moving it into place: %w", path, err))
	}
	id, ok := statID(path)
	if !ok {
		return fail(fmt.Errorf("stream: socket %s vanished right after it was created", path))
	}
	return ln, id, nil
}

// bindPrefix names the private folder a socket is bound in before it is
// renamed into place.
const bindPrefix = ".edged-"

// checkFolder refuses a socket whose folder is missing or not a folder:
// creating it (as root, somewhere under /run or /tmp) is for the one who
// chose the path, not for edged.
func checkFolder(path, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist (socket %s); edged creates no folder outside its own: create it (for the service, systemd's RuntimeDirectory= or a tmpfiles.d entry; the shipped edged.socket makes /run/edged), or choose a path in a folder that exists", ErrNoFolder, dir, path)
	case err != nil:
		return fmt.Errorf("stream: socket %s: folder %s: %w", path, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: socket %s: %s is %s, not a folder; choose another socket path", ErrNoFolder, path, dir, fileKind(fi.Mode()))
	}
	return nil
}

// bindPrivate binds a listener for path inside a fresh 0700 directory
// next to it (locked while it exists: one a killed edged left is removed
// here first), with mode and group (gid -1: left alone) set, and returns
// it, its temporary name and release, which removes the directory; the
// caller renames the socket into place, then releases.
func bindPrivate(path string, mode os.FileMode, gid int) (*net.UnixListener, string, func(), error) {
	dir := filepath.Dir(path)
	atomicfile.RemoveStaleDirs(dir, bindPrefix)
	tmpDir, release, err := atomicfile.TempDir(dir, bindPrefix)
	if err != nil {
		return nil, "", nil, fmt.Errorf("stream: socket %s: creating a private directory in %s: %w (the daemon needs write access to it)", path, dir, err)
	}
	tmp := filepath.Join(tmpDir, "s")
	fail := func(ln *net.UnixListener, err error) (*net.UnixListener, string, func(), error) {
		if ln != nil {
			ln.Close()
		}
		release()
		return nil, "", nil, err
	}
	if len(tmp) > maxSocketPath {
		return fail(nil, fmt.Errorf("%w: socket path %s is too long to bind safely (the temporary name %s exceeds %d bytes); choose a shorter path", ErrSocketPath, path, tmp, maxSocketPath))
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return fail(nil, fmt.Errorf("stream: socket %s: %w", path, err))
	}
	ln.SetUnlinkOnClose(false) // it will live under another name
	if err := os.Chmod(tmp, mode.Perm()); err != nil {
		return fail(ln, fmt.Errorf("stream: socket %s: setting mode %04o: %w", path, mode.Perm(), err))
	}
	if gid >= 0 {
		if err := os.Lchown(tmp, -1, gid); err != nil {
			return fail(ln, fmt.Errorf("stream: socket %s: setting group %d: %w (the daemon's user must be a member of that group, or run as root)", path, gid, err))
		}
	}
	return ln, tmp, release, nil
}

// ProbeSocket does what NewSocket does to make the socket of opts, as this
// process's user, and undoes it: it resolves the group, refuses a missing
// folder (run creates none), refuses a path in use, binds in a private folder beside the
// path with the mode and group set, then removes everything it made. The
// path itself is not touched (a stale socket there is left for NewSocket
// to replace), and a live socket is recognised from /proc/net/unix
// without connecting to it (a connection to a socket-activated one would
// start its service). It is edged check's probe.
func Probe(opts Options) error {
	if opts.Mode == 0 {
		opts.Mode = DefaultSocketMode
	}
	gid, err := resolveGroup(opts.Group)
	if err != nil {
		return err
	}
	if err := checkPathLength(opts.Path); err != nil {
		return err
	}
	if err := checkFolder(opts.Path, filepath.Dir(opts.Path)); err != nil {
		return err
	}
	if listening(opts.Path) {
		return fmt.Errorf("%w: another process is listening on %s (is edged already running?); stop it or choose another socket path", ErrInUse, opts.Path)
	}
	if err := checkStale(opts.Path); err != nil {
		return err
	}
	ln, _, release, err := bindPrivate(opts.Path, opts.Mode, gid)
	if err != nil {
		return err
	}
	ln.Close()
	release()
	return nil
}

// listening reports whether /proc/net/unix lists a listening socket bound
// to path (false when it cannot be read).
func listening(path string) bool {
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path; flag 0x10000 is
		// __SO_ACCEPTCON (a listener).
		f := strings.Fields(line)
		if len(f) < 8 || strings.Join(f[7:], " ") != path {
			continue
		}
		if flags, err := strconv.ParseUint(f[3], 16, 32); err == nil && flags&0x10000 != 0 {
			return true
		}
	}
	return false
}

// checkStale decides whether path may be replaced: missing or a socket
// nobody answers on.
func checkStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream: socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%w: %s is %s; remove it or choose another socket path", ErrNotSocket, path, fileKind(fi.Mode()))
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: another process is listening on %s (is edged already running?); stop it or choose another socket path", ErrInUse, path)
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
		return nil // stale: left behind by a process that is gone
	}
	return fmt.Errorf("stream: socket %s exists and cannot be probed (%w); remove it if no process uses it", path, err)
}

// fileKind names the type of a file for messages (FileMode's String
// writes a symbolic link as "L---------").
func fileKind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a socket"
}

// removeIfOurs removes path if it is still the socket file id.
func removeIfOurs(path string, id fileID) {
	if cur, ok := statID(path); ok && cur == id {
		os.Remove(path)
	}
}

var inherited struct {
	once sync.Once
	ls   map[string][]net.Listener
}

// InheritedListener returns the Unix stream listener systemd passed to this
// process (socket activation) for a socket sink: the one whose
// FileDescriptorName= is name, else the one bound to path; nil when there
// is none. systemd's environment is read once per process, so any listener
// inherited for another purpose must also be taken from here
// (InheritedListeners).
func InheritedListener(name, path string) net.Listener {
	ls := InheritedListeners()
	if name != "" {
		for _, l := range ls[name] {
			if isUnixStream(l) {
				return l
			}
		}
	}
	if path != "" {
		abs, _ := filepath.Abs(path)
		for _, group := range ls {
			for _, l := range group {
				if isUnixStream(l) && (l.Addr().String() == path || l.Addr().String() == abs) {
					return l
				}
			}
		}
	}
	return nil
}

// InheritedListeners returns every listener systemd passed to this process,
// keyed by FileDescriptorName (go-systemd's activation.ListenersWithNames,
// read once and remembered).
func InheritedListeners() map[string][]net.Listener {
	inherited.once.Do(func() {
		inherited.ls, _ = activation.ListenersWithNames() // never returns an error
	})
	return inherited.ls
}

func isUnixStream(l net.Listener) bool {
	_, ok := l.(*net.UnixListener)
	return ok && l.Addr().Network() == "unix"
}
