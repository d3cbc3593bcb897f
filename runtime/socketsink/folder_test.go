package socketsink

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSocketFolderMustExist: a socket in a folder that does not exist is
// ErrNoFolder, and the folder is not made; a bind folder a killed edged
// left next to the socket (.edged-*, nobody holding it) is removed.
func TestSocketFolderMustExist(t *testing.T) {
	dir := t.TempDir()
	_, err := New(Options{Path: filepath.Join(dir, "no", "s.sock"), NoActivation: true})
	if !errors.Is(err, ErrNoFolder) {
		t.Fatalf("err %v, want ErrNoFolder", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !os.IsNotExist(err) {
		t.Fatalf("the folder was made: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o600)
	if _, err := New(Options{Path: filepath.Join(dir, "file", "s.sock"), NoActivation: true}); !errors.Is(err, ErrNoFolder) {
		t.Fatalf("a file as the folder: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, ".edged-4242"), 0o700)
	os.WriteFile(filepath.Join(dir, ".edged-4242", "s"), nil, 0o600)
	s, err := New(Options{Path: filepath.Join(dir, "s.sock"), NoActivation: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, ".edged-4242")); !os.IsNotExist(err) {
		t.Errorf("the stale bind folder is still there: %v", err)
	}
}
