package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// TempDir makes a private folder (0700) dir/<prefix><random> and locks it
// (flock) until release, which also removes it with what it holds. A
// folder left by a process killed before release is removed by
// RemoveStaleDirs.
func TempDir(dir, prefix string) (path string, release func(), err error) {
	path, err = os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", nil, err
	}
	d, err := os.Open(path)
	if err == nil {
		err = syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			d.Close()
		}
	}
	if err != nil {
		os.RemoveAll(path)
		return "", nil, err
	}
	return path, func() {
		os.RemoveAll(path)
		d.Close()
	}, nil
}

// RemoveStaleDirs removes the folders of TempDir with prefix in dir that no
// process holds, and returns their names.
func RemoveStaleDirs(dir, prefix string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || len(e.Name()) == len(prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		d, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil && os.RemoveAll(p) == nil {
			removed = append(removed, e.Name())
		}
		d.Close()
	}
	return removed
}
