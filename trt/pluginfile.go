package trt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/edged-dev/edged/internal/regfile"
)

// ErrPluginFile is wrapped by CheckPluginFile's errors.
var ErrPluginFile = errors.New("trt: unusable plugin library")

// CheckPluginFile checks a TensorRT plugin library before it is loaded:
// a plugin is native code that runs inside edged, so the file (symlinks
// followed, opened as internal/regfile opens every file a configuration
// names) must be a regular file of at most maxBytes, start like an ELF
// shared object, be owned by root or by the user edged runs as, and be
// writable by no one else (not group- or world-writable). The same checks
// run when edged check and edged run read the configuration and again
// just before the library is opened. Errors wrap ErrPluginFile and name
// the path.
func CheckPluginFile(path string, maxBytes int64) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrPluginFile, path, fmt.Sprintf(format, args...))
	}
	// Opened as every file a configuration names is (internal/regfile):
	// without blocking, a regular file checked before and after the open.
	f, st, err := regfile.Open(path, maxBytes)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, regfile.ErrTooLarge) {
			return bad("more than the %d-byte limit for files edged reads (daemon.max_model_bytes)", maxBytes)
		}
		return bad("%v", err)
	}
	defer f.Close()
	switch {
	case st.Mode().Perm()&0o022 != 0:
		return bad("mode %04o lets users other than its owner change it, and a plugin runs inside edged: chmod go-w it", st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return bad("owned by uid %d, which is neither root nor the user edged runs as (uid %d): chown it to root", sys.Uid, os.Geteuid())
	}
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || !bytes.Equal(magic[:], []byte("\x7fELF")) {
		return bad("not an ELF shared object (a plugin library is a .so built for this machine)")
	}
	return nil
}
