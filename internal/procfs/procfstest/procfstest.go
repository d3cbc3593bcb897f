package procfstest

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/edged-dev/edged/internal/procfs"
)

// RSS is the VmRSS in bytes of process pid, 0 meaning this process. A test
// of this process skips where /proc/self/status does not exist; any other
// failure (a child's status unreadable) fails the test.
func RSS(t testing.TB, pid int) int64 {
	t.Helper()
	m, err := procfs.ReadMem(pid)
	if pid == 0 && errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no /proc/self/status: %v", err)
	}
	if err != nil {
		t.Fatalf("RSS of process %d: %v", pid, err)
	}
	return m.RSSBytes()
}
