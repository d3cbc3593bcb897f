package runtime

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/procfs/procfstest"
)

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
	before := procfstest.RSS(t, 0)
	if wrote, err := l.save(context.Background(), saveJob{model: "big", path: model, sha: sum}); !wrote || err != nil {
		t.Fatalf("save: wrote %v, %v", wrote, err)
	}
	time.Sleep(100 * time.Millisecond)
	if grew := procfstest.RSS(t, 0) - before; grew > 48<<20 {
		t.Errorf("RSS %d MiB above the %d MiB before keeping a copy of a %d MiB model", grew>>20, before>>20, size>>20)
	}
}
