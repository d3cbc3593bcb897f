package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

func touch(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("\x7fELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeCache writes a loader cache: binary entries, then NUL-terminated
// sonames and paths, as glibc's ld.so.cache lays them out.
func fakeCache(t *testing.T, paths ...string) string {
	t.Helper()
	b := []byte("glibc-ld.so.cache1.1\x03\x00\x00\x00\x88\x13\xfe\x7f\x01")
	for _, p := range paths {
		b = append(b, filepath.Base(p)...)
		b = append(b, 0)
		b = append(b, p...)
		b = append(b, 0)
	}
	b = append(b, "libc.so.6\x00/usr/lib/x86_64-linux-gnu/libc.so.6\x00"...)
	f := filepath.Join(t.TempDir(), "ld.so.cache")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFindOrder(t *testing.T) {
	root := t.TempDir()
	exe := filepath.Join(root, "opt", "bin")
	if err := os.MkdirAll(exe, 0o755); err != nil {
		t.Fatal(err)
	}
	explicit := touch(t, filepath.Join(root, "cfg", Soname))
	env := touch(t, filepath.Join(root, "env", Soname))
	ld := filepath.Join(root, "ldpath")
	cached := filepath.Join(root, "cached", Soname)
	sys := filepath.Join(root, "sys")

	// Each step removes the winner of the previous one.
	steps := []struct {
		name string
		make func() string // creates the candidate, returns the expected path
		set  func(*Search)
	}{
		{"system", func() string { return touch(t, filepath.Join(sys, Soname)) }, nil},
		{"cache", func() string { return touch(t, cached) }, nil},
		{"LD_LIBRARY_PATH", func() string { return touch(t, filepath.Join(ld, Soname)) }, nil},
		{"third_party", func() string {
			return touch(t, filepath.Join(root, "opt", "third_party", "onnxruntime", runtime.GOARCH, Soname))
		}, nil},
		{"lib/edged", func() string { return touch(t, filepath.Join(root, "opt", "lib", "edged", Soname)) }, nil},
		{"exe .so", func() string { return touch(t, filepath.Join(exe, "libonnxruntime.so")) }, nil},
		{"exe .so.1", func() string { return touch(t, filepath.Join(exe, Soname)) }, nil},
		{"env", func() string { return env }, func(s *Search) { s.Env = env }},
		{"explicit", func() string { return explicit }, func(s *Search) { s.Explicit = explicit }},
	}
	s := Search{
		ExeDir:        exe,
		LDLibraryPath: filepath.Join(root, "nothing") + ":" + ld,
		LDCache:       fakeCache(t, "/nonexistent/"+Soname, cached),
		SystemDirs:    []string{filepath.Join(root, "empty"), sys},
	}
	for _, st := range steps {
		want := st.make()
		if st.set != nil {
			st.set(&s)
		}
		got, err := s.Find()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if filepath.Clean(got) != filepath.Clean(want) {
			t.Errorf("%s: found %s, want %s", st.name, got, want)
		}
	}
}

func TestFindNothing(t *testing.T) {
	root := t.TempDir()
	s := Search{
		ExeDir:        filepath.Join(root, "bin"),
		LDLibraryPath: filepath.Join(root, "ld"),
		LDCache:       fakeCache(t),
		SystemDirs:    []string{filepath.Join(root, "usr", "lib")},
	}
	_, err := s.Find()
	if !errors.Is(err, ErrLibraryNotFound) || !errors.Is(err, trt.ErrBackend) {
		t.Fatalf("Find = %v, want ErrLibraryNotFound and trt.ErrBackend", err)
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(root, "bin", Soname), filepath.Join(root, "ld", Soname), s.LDCache,
		filepath.Join(root, "usr", "lib", Soname), "make deps", EnvLibrary, ConfigKey,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}

	s.LDCache = filepath.Join(root, "no-cache")
	if _, err := s.Find(); err == nil || !strings.Contains(err.Error(), s.LDCache) {
		t.Errorf("missing cache not reported: %v", err)
	}
}

func TestFindExplicitMustExist(t *testing.T) {
	root := t.TempDir()
	fallback := touch(t, filepath.Join(root, "bin", Soname))
	for _, s := range []Search{
		{Explicit: filepath.Join(root, "missing.so"), ExeDir: filepath.Dir(fallback)},
		{Env: filepath.Join(root, "missing.so"), ExeDir: filepath.Dir(fallback)},
		{Explicit: root},
	} {
		got, err := s.Find()
		if err == nil {
			t.Errorf("%+v: found %s; a configured path that does not exist must be an error", s, got)
			continue
		}
		named := s.Explicit + s.Env
		if !errors.Is(err, ErrLibraryNotFound) || !strings.Contains(err.Error(), named) {
			t.Errorf("Find = %v, want ErrLibraryNotFound naming %s", err, named)
		}
	}
}

func TestCachedPathsRealCache(t *testing.T) {
	const cache = "/etc/ld.so.cache"
	if _, err := os.Stat(cache); err != nil {
		t.Skip("no loader cache on this machine")
	}
	// Every glibc system lists its C library in the cache.
	paths, err := cachedPaths(cache, "libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(paths, func(p string) bool { return isFile(p) }) {
		t.Errorf("no existing libc.so.6 among the cache's paths %v", paths)
	}
}

func TestDefaultSearch(t *testing.T) {
	t.Setenv(EnvLibrary, "/from/env")
	s := DefaultSearch("/from/config")
	exe, _ := os.Executable()
	if s.Explicit != "/from/config" || s.Env != "/from/env" || s.ExeDir == "" || !strings.HasPrefix(exe, "/") || len(s.SystemDirs) == 0 {
		t.Errorf("DefaultSearch = %+v", s)
	}
}

// FuzzParseCache: any cache file content gives absolute paths ending in
// the soname, and no panic.
func FuzzParseCache(f *testing.F) {
	f.Add([]byte("glibc-ld.so.cache1.1\x01\x02libonnxruntime.so.1\x00/usr/lib/libonnxruntime.so.1\x00"))
	f.Add([]byte("\x00\x00/libonnxruntime.so.1"))
	f.Add([]byte("ld.so-1.7.0\x00\xff/a/b/libonnxruntime.so.1\x00/a/b/libonnxruntime.so.1\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		paths := parseCache(data, Soname)
		seen := map[string]bool{}
		for _, q := range paths {
			if !strings.HasPrefix(q, "/") || !strings.HasSuffix(q, "/"+Soname) || seen[q] {
				t.Fatalf("bad or repeated path %q from %q", q, data)
			}
			seen[q] = true
		}
	})
}
