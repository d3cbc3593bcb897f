package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotRegular refuses a path that leads to something other than a
	// regular file: a FIFO, a device, a socket or a directory.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge refuses a file larger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
)

// NoLimit passed as a limit checks the type of the file but not its size.
const NoLimit = -1

// Open opens the regular file at path for reading (symlinks followed)
// without ever blocking on it, and returns it with its stat. A path that
// leads to anything but a regular file is refused with ErrNotRegular
// before it is opened (opening a device can have effects: a serial line
// raises DTR) and again after (it may have been replaced in between); a
// file larger than limit bytes (unless limit is NoLimit) with ErrTooLarge.
func Open(path string, limit int64) (*os.File, fs.FileInfo, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, nil, err
	} else if err := check(path, st, limit); err != nil {
		return nil, nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	// Checked again on what was opened: the path may lead elsewhere now.
	// Regular files ignore O_NONBLOCK; it is cleared anyway, before Go
	// looks at the descriptor, so that it behaves as os.Open's would.
	var ust unix.Stat_t
	if err := unix.Fstat(fd, &ust); err != nil {
		unix.Close(fd)
		return nil, nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if ust.Mode&unix.S_IFMT == unix.S_IFREG {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
			unix.Close(fd)
			return nil, nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
		}
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err == nil {
		err = check(path, st, limit)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// OpenIn is Open of name inside root: no path, symbolic link included,
// may lead out of root.
func OpenIn(root *os.Root, name string, limit int64) (*os.File, fs.FileInfo, error) {
	path := root.Name() + string(os.PathSeparator) + name
	if st, err := root.Stat(name); err != nil {
		return nil, nil, err
	} else if err := check(path, st, limit); err != nil {
		return nil, nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = check(path, st, limit)
	}
	if err == nil {
		// Regular files ignore O_NONBLOCK; cleared as Open does.
		_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, 0)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// ReadFile reads the whole regular file at path, as Open checks it, and
// refuses it with ErrTooLarge if it holds more than limit bytes when read
// (it may grow after the check).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := st.Size()
	r := io.Reader(f)
	if limit >= 0 {
		r = io.LimitReader(f, limit+1)
		size = min(size, limit)
	}
	data := make([]byte, 0, size+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
	}
	if limit >= 0 && int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: tooLarge(int64(len(data)), limit, true)}
	}
	return data, nil
}

// check refuses st unless it is a regular file within limit.
func check(path string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	if limit >= 0 && st.Size() > limit {
		return &fs.PathError{Op: "open", Path: path, Err: tooLarge(st.Size(), limit, false)}
	}
	return nil
}

func tooLarge(size, limit int64, grew bool) error {
	if grew {
		return fmt.Errorf("%w: it grew past the %s limit while being read", ErrTooLarge, Size(limit))
	}
	return fmt.Errorf("%w: %s, more than the %s limit; it was not read", ErrTooLarge, Size(size), Size(limit))
}

// kind names a file type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "type " + m.Type().String()
}

// Size writes a byte count for people: "1 MiB", "64 KiB", "2147483648 bytes (2048 MiB)".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
