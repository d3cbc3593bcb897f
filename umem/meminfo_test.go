package umem

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestReadMeminfoFixtures(t *testing.T) {
	cases := []struct {
		file  string
		want  Meminfo
		error bool
	}{
		{"orin.txt", Meminfo{MemTotal: 31811344 << 10, MemFree: 25178932 << 10, MemAvailable: 28114724 << 10, SwapFree: 15905664 << 10, NvMapMemUsed: 931584 << 10}, false},
		{"x86.txt", Meminfo{MemTotal: 131891280 << 10, MemFree: 95432812 << 10, MemAvailable: 120000000 << 10}, false},
		{"no-available.txt", Meminfo{}, true},
		{"bad-number.txt", Meminfo{}, true},
		{"bad-unit.txt", Meminfo{}, true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			root := t.TempDir()
			b, err := os.ReadFile(filepath.Join("testdata", "meminfo", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "meminfo"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadMeminfo(root)
			if c.error {
				if !errors.Is(err, ErrMeminfo) {
					t.Fatalf("ReadMeminfo = %+v, %v; want an error wrapping ErrMeminfo", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ReadMeminfo = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	if _, err := ReadMeminfo(t.TempDir()); err == nil {
		t.Error("ReadMeminfo of a root without meminfo succeeded")
	}
}

func FuzzParseMeminfo(f *testing.F) {
	for _, name := range []string{"orin.txt", "x86.txt", "no-available.txt", "bad-number.txt", "bad-unit.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "meminfo", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("MemTotal: 18446744073709551615 kB\nMemAvailable: 1\n"))
	f.Add([]byte(":\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeminfo(b)
		if err != nil {
			if !errors.Is(err, ErrMeminfo) {
				t.Fatalf("error %v does not wrap ErrMeminfo", err)
			}
			return
		}
		if !bytes.Contains(b, []byte("MemTotal:")) || !bytes.Contains(b, []byte("MemAvailable:")) {
			t.Fatalf("parsed %+v from input without MemTotal and MemAvailable", m)
		}
	})
}

// TestReadMeminfoReusesItsBuffer: a read allocates what opening the file
// does, not a 64 KiB buffer each time (it runs on every scrape).
func TestReadMeminfoReusesItsBuffer(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	ReadMeminfo("") // the pool's first buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 50
	for i := 0; i < n; i++ {
		if _, err := ReadMeminfo(""); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 8<<10 {
		t.Errorf("ReadMeminfo allocates %d bytes a call, want under 8 KiB (the buffer is pooled)", per)
	}
}
