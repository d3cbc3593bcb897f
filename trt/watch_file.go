package trt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// fileKey identifies one version of a file as far as stat can tell: a
// rename-into-place changes the inode, an in-place write the size or mtime.
type fileKey struct {
	fi    os.FileInfo
	size  int64
	mtime time.Time
}

func keyOf(fi os.FileInfo) fileKey { return fileKey{fi: fi, size: fi.Size(), mtime: fi.ModTime()} }

func (k fileKey) same(o fileKey) bool {
	return k.fi != nil && o.fi != nil && k.size == o.size && k.mtime.Equal(o.mtime) && os.SameFile(k.fi, o.fi)
}

// errUnstable means the file changed while it was being read.
var errUnstable = errors.New("trt: model file changed while being read")

// statFile stats path, following symlinks.
func statFile(path string) (fileKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileKey{}, err
	}
	if !fi.Mode().IsRegular() {
		return fileKey{}, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return keyOf(fi), nil
}

// missing reports whether a stat or open error means "the file is not
// there" (a dangling symlink or a missing folder included).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// readFile reads path once into memory and returns the bytes with the key
// they belong to. The file's stat must be the same before and after the
// read (and equal to want, when want is set), else errUnstable: hashing and
// loading then use the very bytes that were checked.
func readFile(path string, maxBytes int64, want fileKey) ([]byte, fileKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileKey{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileKey{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fileKey{}, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	before := keyOf(fi)
	if want.fi != nil && !before.same(want) {
		return nil, before, errUnstable
	}
	if before.size > maxBytes {
		return nil, before, fmt.Errorf("%s is %d bytes, more than the %d-byte limit for a model file", path, before.size, maxBytes)
	}
	data := make([]byte, before.size)
	if _, err := io.ReadFull(f, data); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, before, errUnstable // truncated while reading
		}
		return nil, before, err
	}
	var one [1]byte
	if n, _ := f.Read(one[:]); n > 0 {
		return nil, before, errUnstable // grew while reading
	}
	fi, err = f.Stat()
	if err != nil {
		return nil, before, err
	}
	if after := keyOf(fi); !after.same(before) {
		return nil, after, errUnstable
	}
	return data, before, nil
}
