package regfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// quick fails the test if f takes longer than a second: nothing here may
// block on what it opens.
func quick(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("%s blocked", what)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, []byte("hello"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "nothing"), dangling)
	link := filepath.Join(dir, "link")
	os.Symlink(reg, link)

	for _, c := range []struct {
		path  string
		limit int64
		want  string
		err   error
		msg   string
	}{
		{path: reg, limit: 5, want: "hello"},
		{path: reg, limit: NoLimit, want: "hello"},
		{path: link, limit: 16, want: "hello"},
		{path: reg, limit: 4, err: ErrTooLarge, msg: "5 bytes, more than the 4 bytes limit"},
		{path: fifo, limit: 1 << 20, err: ErrNotRegular, msg: "a FIFO"},
		{path: zero, limit: 1 << 20, err: ErrNotRegular, msg: "a character device"},
		{path: dir, limit: 1 << 20, err: ErrNotRegular, msg: "a directory"},
		{path: dangling, limit: 1 << 20, err: fs.ErrNotExist},
		// /proc files say size 0 and hold more: the limit holds on what
		// is read, not only on what stat says.
		{path: "/proc/self/status", limit: 64, err: ErrTooLarge, msg: "grew past the 64 bytes limit"},
	} {
		var got []byte
		var err error
		quick(t, c.path, func() { got, err = ReadFile(c.path, c.limit) })
		if c.err == nil {
			if err != nil || string(got) != c.want {
				t.Errorf("ReadFile(%s, %d) = %q, %v; want %q", c.path, c.limit, got, err, c.want)
			}
			continue
		}
		var pe *fs.PathError
		if !errors.Is(err, c.err) || !errors.As(err, &pe) || pe.Path != c.path || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ReadFile(%s, %d): %v; want a PathError naming the file, wrapping %v, saying %q", c.path, c.limit, err, c.err, c.msg)
		}
	}
}

// TestOpenFIFOWithWriter: a FIFO is refused even while a writer holds it
// open (it would then not block, but is still not a file).
func TestOpenFIFOWithWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // O_RDWR: does not wait for a reader
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write(bytes.Repeat([]byte("x"), 100))
	quick(t, "Open", func() {
		if _, _, err := Open(fifo, NoLimit); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open of a FIFO: %v", err)
		}
	})
}

func TestOpenGivesABlockingDescriptor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("abc"), 0o644)
	f, st, err := Open(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st.Size() != 3 {
		t.Errorf("size %d", st.Size())
	}
	rc, _ := f.SyscallConn()
	rc.Control(func(fd uintptr) {
		fl, _ := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if fl&unix.O_NONBLOCK != 0 {
			t.Error("O_NONBLOCK left set")
		}
	})
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 100: "100 bytes", 64 << 10: "64 KiB", 1 << 20: "1 MiB",
		3<<20 + 5: "3145733 bytes (3.0 MiB)"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzReadFile: whatever the content, the limit and what the path leads
// to (a regular file, a FIFO, a directory, a device, a dangling link),
// ReadFile returns at once, returns the content exactly when the path is
// a regular file within the limit, and otherwise an error naming the file
// that says which guard refused it.
func FuzzReadFile(f *testing.F) {
	f.Add([]byte("[daemon]\n"), uint8(0), uint16(100))
	f.Add([]byte("0123456789"), uint8(0), uint16(9))
	f.Add([]byte{}, uint8(1), uint16(0))
	f.Add([]byte("x"), uint8(2), uint16(1))
	f.Add([]byte("x"), uint8(3), uint16(1))
	f.Add([]byte("x"), uint8(4), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, limit16 uint16) {
		limit := int64(limit16) - 1 // -1 is NoLimit
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		var want error
		switch kind % 5 {
		case 0:
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if limit >= 0 && int64(len(data)) > limit {
				want = ErrTooLarge
			}
		case 1:
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			want = ErrNotRegular
		case 2:
			os.Mkdir(p, 0o755)
			want = ErrNotRegular
		case 3:
			os.Symlink("/dev/null", p)
			want = ErrNotRegular
		case 4:
			os.Symlink(filepath.Join(dir, "none"), p)
			want = fs.ErrNotExist
		}
		var got []byte
		var err error
		quick(t, "ReadFile", func() { got, err = ReadFile(p, limit) })
		if want == nil {
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadFile of %d bytes, limit %d: %d bytes, %v", len(data), limit, len(got), err)
			}
			return
		}
		var pe *fs.PathError
		if got != nil || !errors.Is(err, want) || !errors.As(err, &pe) || pe.Path != p {
			t.Fatalf("kind %d, %d bytes, limit %d: %q, %v; want %v naming %s", kind%5, len(data), limit, got, err, want, p)
		}
	})
}
