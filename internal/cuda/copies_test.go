package cuda

import "testing"

func TestCopiesSubAndHost(t *testing.T) {
	before := CopyCounts()
	copies.htod.Add(2)
	copies.dtoh.Add(3)
	copies.dtod.Add(5)
	got := CopyCounts().Sub(before)
	if got != (Copies{2, 3, 5}) || got.Host() != 5 {
		t.Fatalf("copies since: %+v (host %d), want {2 3 5} (host 5)", got, got.Host())
	}
}
