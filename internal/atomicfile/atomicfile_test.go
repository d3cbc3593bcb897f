package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new content"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, []byte("new content")) {
		t.Fatalf("read %q, %v", got, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("folder holds %d entries, want only the target", len(ents))
	}
}

func TestWriteFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "target")
	// A folder in the target's place makes the rename fail after the
	// temporary file was written: it must be cleaned up.
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("data"), 0o600); err == nil {
		t.Fatal("writing over a non-empty folder succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "target" || !ents[0].IsDir() {
		t.Errorf("folder after a failed write: %v", ents)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}

// TestRemoveStaleKeepsWhatIsBeingWritten: a temporary a killed writer left
// (no lock) is removed; one being written now (its lock held, here by this
// process as another edged would) and files that are not Write's
// temporaries are left alone; names restrict it to those targets.
func TestRemoveStaleKeepsWhatIsBeingWritten(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{".demo.model.tmp123", ".cam.model.tmp9", ".hidden", "x.tmp1", ".y.tmpabc", "demo.model"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600)
	}
	live, err := os.OpenFile(filepath.Join(dir, ".demo.model.tmp456"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := syscall.Flock(int(live.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	gone, err := RemoveStale(dir, "demo.model")
	if err != nil || !slices.Equal(gone, []string{".demo.model.tmp123"}) {
		t.Fatalf("removed %v, %v", gone, err)
	}
	gone, _ = RemoveStale(dir)
	if !slices.Equal(gone, []string{".cam.model.tmp9"}) {
		t.Fatalf("removed %v", gone)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{".demo.model.tmp456", ".hidden", ".y.tmpabc", "demo.model", "x.tmp1"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

// TestWriteInStaysInside: WriteIn follows no symbolic link out of its
// root (a folder in it that links elsewhere is refused, nothing is written
// there).
func TestWriteInStaysInside(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	os.Symlink(elsewhere, filepath.Join(root, "last-good"))
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := WriteIn(r, "last-good/demo.model", []byte("x"), 0o600); err == nil {
		t.Fatal("a write through a link out of the root succeeded")
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("written outside: %v", ents)
	}
	if err := WriteIn(r, "inside.model", []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStaleTempDirs: a private folder a killed process left is removed, a
// held one is not.
func TestStaleTempDirs(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".edged-111"), 0o700)
	os.WriteFile(filepath.Join(dir, ".edged-111", "s"), nil, 0o600)
	held, release, err := TempDir(dir, ".edged-")
	if err != nil {
		t.Fatal(err)
	}
	if gone := RemoveStaleDirs(dir, ".edged-"); !slices.Equal(gone, []string{".edged-111"}) {
		t.Fatalf("removed %v", gone)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("the held folder went: %v", err)
	}
	release()
	if _, err := os.Stat(held); !os.IsNotExist(err) {
		t.Errorf("release left %s: %v", held, err)
	}
}
