package cuda

import (
	"strings"
	"testing"
)

// Names follow the cuda.h pattern and are unique; every entry has a text.
func TestResultTable(t *testing.T) {
	seen := map[string]Result{}
	for r, i := range resultTable {
		if r != 0 && !strings.HasPrefix(i.name, "CUDA_ERROR_") || i.text == "" {
			t.Errorf("table entry %d = %+v", r, i)
		}
		if o, dup := seen[i.name]; dup {
			t.Errorf("%s used for %d and %d", i.name, o, r)
		}
		seen[i.name] = r
	}
	if Result(2).Error() != "CUDA_ERROR_OUT_OF_MEMORY (2): "+Result(2).Text() || Result(12345).Name() != "CUresult(12345)" || Result(12345).Known() {
		t.Errorf("Result(2) = %q, Result(12345) = %q", Result(2).Error(), Result(12345).Error())
	}
}
