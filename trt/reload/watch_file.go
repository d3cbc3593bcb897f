package reload

import (
	"github.com/edged-dev/edged/trt"

	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/edged-dev/edged/internal/regfile"
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

// readModel reads the model file once into memory and returns the bytes
// with the key they belong to. The file's stat must be the same before and
// after the read (and equal to want, when want is set), else errUnstable:
// hashing and loading then use the very bytes that were checked.
//
// Before the file is read whole, its size is checked against MaxBytes
// (ErrTooLarge) and the memory budget (ErrMemory), and its first bytes
// against the backend's Sniffer (ErrEngineInvalid). Such a rejection
// returns data nil, unless the whole file fitted in the first bytes: data
// then holds it. Other errors are I/O errors.
func (r *Reloader) readModel(want fileKey) ([]byte, fileKey, error) {
	path := r.path
	// Opened without blocking: a FIFO or a device put at the path is
	// refused at once (regfile), never waited on.
	f, fi, err := regfile.Open(path, regfile.NoLimit)
	if err != nil {
		return nil, fileKey{}, err
	}
	defer f.Close()
	before := keyOf(fi)
	if want.fi != nil && !before.same(want) {
		return nil, before, errUnstable
	}
	if before.size > r.opts.MaxBytes {
		return nil, before, fmt.Errorf("%w: %s is %d bytes (%d MiB), more than the %d-byte (%d MiB) limit for a model file; it was not read "+
			"(raise max_model_bytes in [daemon] if the model really is this large)", trt.ErrTooLarge, path, before.size, mib(before.size), r.opts.MaxBytes, mib(r.opts.MaxBytes))
	}
	if err := r.opts.Budget(before.size); err != nil {
		if !errors.Is(err, trt.ErrMemory) {
			err = fmt.Errorf("%w: %w", trt.ErrMemory, err)
		}
		return nil, before, fmt.Errorf("%w; the file was not read", err)
	}
	head := make([]byte, min(before.size, trt.SniffBytes))
	if _, err := io.ReadFull(f, head); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, before, errUnstable // truncated while reading
		}
		return nil, before, err
	}
	if s, ok := r.opts.Backend.(trt.Sniffer); ok {
		if err := s.Sniff(head, before.size); err != nil {
			if !errors.Is(err, trt.ErrEngineInvalid) {
				err = fmt.Errorf("%w: %w", trt.ErrEngineInvalid, err)
			}
			if int64(len(head)) < before.size {
				return nil, before, fmt.Errorf("%w (checked from its first %d bytes; the %d MiB file was not read)", err, len(head), mib(before.size))
			}
			if err2 := endOfRead(f, before); err2 != nil {
				return nil, before, err2
			}
			return head, before, err
		}
	}
	data := head
	if int64(len(head)) < before.size {
		data = make([]byte, before.size)
		copy(data, head)
		if _, err := io.ReadFull(f, data[len(head):]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, before, errUnstable // truncated while reading
			}
			return nil, before, err
		}
	}
	if err := endOfRead(f, before); err != nil {
		return nil, before, err
	}
	return data, before, nil
}

// endOfRead checks that f, read up to its size at open, has no more bytes
// and the same stat: else errUnstable.
func endOfRead(f *os.File, before fileKey) error {
	var one [1]byte
	if n, _ := f.Read(one[:]); n > 0 {
		return errUnstable // grew while reading
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !keyOf(fi).same(before) {
		return errUnstable
	}
	return nil
}
