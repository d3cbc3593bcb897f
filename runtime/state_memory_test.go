package runtime

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// selfRSS is this process's VmRSS.
func selfRSS(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestLastGoodSaveGivesMemoryBack: keeping a copy of a large model file
// reads it whole; that memory goes back to the system when the copy is
// written, not at a garbage collection minutes later (issue 10, finding 1).
func TestLastGoodSaveGivesMemoryBack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory stays resident")
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "big.onnx")
	const size = 192 << 20
	if err := os.WriteFile(model, []byte("model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(model, size); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var sum [32]byte
	h.Sum(sum[:0])
	l := newLastGood(filepath.Join(dir, "state"), nil, 0)
	goruntime.GC()
	debug.FreeOSMemory()
	before := selfRSS(t)
	if wrote, err := l.save(context.Background(), saveJob{model: "big", path: model, sha: sum}); !wrote || err != nil {
		t.Fatalf("save: wrote %v, %v", wrote, err)
	}
	time.Sleep(100 * time.Millisecond)
	if grew := selfRSS(t) - before; grew > 48<<20 {
		t.Errorf("RSS %d MiB above the %d MiB before keeping a copy of a %d MiB model", grew>>20, before>>20, size>>20)
	}
}
