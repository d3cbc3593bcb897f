package atomicfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// Write replaces path with data, atomically and durably, with permissions
// perm. The temporary file is ".<name>.tmp<digits>" next to path, locked
// (flock) while it is written, and removed on any failure; one left by a
// process killed meanwhile is removed by RemoveStale. The folder must
// exist.
func Write(path string, data []byte, perm os.FileMode) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return WriteIn(root, filepath.Base(path), data, perm)
}

// WriteIn is Write of name inside root: no path, symbolic link included,
// may lead out of root.
func WriteIn(root *os.Root, name string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(name)
	tmp, f, err := createTemp(root, dir, base)
	if err != nil {
		return err
	}
	// The lock says "being written" to RemoveStale in another process; it
	// is held until the temporary is renamed or removed.
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		root.Remove(tmp)
		return err
	}
	d, err := root.Open(filepath.Clean(dir + "."))
	if err != nil {
		return err
	}
	defer d.Close()
	// Some file systems cannot fsync a directory (EINVAL); the rename is
	// then as durable as they make it.
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync %s: %w", filepath.Join(root.Name(), dir), err)
	}
	return nil
}

// createTemp creates dir/.<base>.tmp<digits> in root, exclusively.
func createTemp(root *os.Root, dir, base string) (string, *os.File, error) {
	for range 100 {
		var b [6]byte
		rand.Read(b[:])
		n := fmt.Sprint(uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5]))
		tmp := dir + "." + base + ".tmp" + n
		f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return tmp, f, err
	}
	return "", nil, fmt.Errorf("atomicfile: no free temporary name for %s in %s", base, root.Name())
}

// tempName is a temporary of Write: ".<name>.tmp<digits>".
var tempName = regexp.MustCompile(`^\..+\.tmp[0-9]+$`)

// RemoveStale removes the temporaries of Write in dir that no process is
// writing (a writer killed mid-write leaves its temporary behind): those
// of the given target names, or of any name when none is given. A
// temporary being written holds its lock and is left alone. It returns
// the names it removed.
func RemoveStale(dir string, names ...string) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return RemoveStaleIn(root, names...)
}

// RemoveStaleIn is RemoveStale of root's own folder.
func RemoveStaleIn(root *os.Root, names ...string) ([]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !tempName.MatchString(n) || !ofTargets(n, names) {
			continue
		}
		if stale(root, n) {
			if err := root.Remove(n); err == nil {
				removed = append(removed, n)
			}
		}
	}
	return removed, nil
}

func ofTargets(tmp string, names []string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if rest, ok := strings.CutPrefix(tmp, "."+n+".tmp"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}

// stale reports whether no process holds the temporary's lock.
func stale(root *os.Root, name string) bool {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}
