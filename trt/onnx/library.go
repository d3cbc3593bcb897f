package onnx

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/edged-dev/edged/trt"
)

// Names of the ONNX Runtime library and how it is configured.
const (
	// Soname is the file name ONNX Runtime's shared library is looked up by.
	Soname = "libonnxruntime.so.1"
	// EnvLibrary names the environment variable that points at the library.
	EnvLibrary = "EDGED_ONNXRUNTIME_LIB"
	// ConfigKey is the configuration key that points at the library.
	ConfigKey = "daemon.onnxruntime_lib"
)

// ErrLibraryNotFound is returned (wrapped, together with trt.ErrBackend)
// when no ONNX Runtime library can be found.
var ErrLibraryNotFound = errors.New("ONNX Runtime library not found")

// Search is where FindLibrary looks. DefaultSearch fills it from the
// process; tests fill it by hand.
type Search struct {
	Explicit      string   // path from the configuration (ConfigKey)
	Env           string   // value of $EDGED_ONNXRUNTIME_LIB
	ExeDir        string   // folder of the running binary
	LDLibraryPath string   // value of $LD_LIBRARY_PATH
	LDCache       string   // the dynamic loader's cache, /etc/ld.so.cache
	SystemDirs    []string // folders searched last
}

// DefaultSearch is the search of a running edged: explicit is the
// configured path ("" when unset).
func DefaultSearch(explicit string) Search {
	s := Search{
		Explicit:      explicit,
		Env:           os.Getenv(EnvLibrary),
		LDLibraryPath: os.Getenv("LD_LIBRARY_PATH"),
		LDCache:       "/etc/ld.so.cache",
		SystemDirs:    systemDirs(),
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		s.ExeDir = filepath.Dir(exe)
	}
	return s
}

func systemDirs() []string {
	multiarch := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	dirs := []string{"/usr/local/lib", "/usr/local/lib/edged", "/usr/lib/edged"}
	if multiarch != "" {
		dirs = append(dirs, "/usr/lib/"+multiarch, "/lib/"+multiarch)
	}
	return append(dirs, "/usr/lib64", "/usr/lib", "/lib")
}

// FindLibrary returns the path of the ONNX Runtime library that
// DefaultSearch(explicit) finds.
func FindLibrary(explicit string) (string, error) { return DefaultSearch(explicit).Find() }

// Find returns the first ONNX Runtime library found, in this order:
//  1. Explicit (the configuration), then Env ($EDGED_ONNXRUNTIME_LIB): a
//     path given there must exist, or Find fails naming it;
//  2. next to the binary: ExeDir/libonnxruntime.so.1, ExeDir/libonnxruntime.so,
//     ExeDir/../lib/edged/ (an installed tree) and
//     ExeDir/../third_party/onnxruntime/GOARCH/ (the tree `make deps` fills,
//     for bin/edged in a checkout);
//  3. the folders of LD_LIBRARY_PATH, the paths the dynamic loader's cache
//     lists for libonnxruntime.so.1, then SystemDirs.
//
// When nothing is found the error names every place tried and how to fix
// it; it wraps ErrLibraryNotFound and trt.ErrBackend.
func (s Search) Find() (string, error) {
	if s.Explicit != "" {
		return mustExist(s.Explicit, "configured by "+ConfigKey)
	}
	if s.Env != "" {
		return mustExist(s.Env, "named by $"+EnvLibrary)
	}
	var tried []string
	try := func(p string) bool {
		tried = append(tried, p)
		return isFile(p)
	}
	if s.ExeDir != "" {
		for _, p := range []string{
			filepath.Join(s.ExeDir, Soname),
			filepath.Join(s.ExeDir, "libonnxruntime.so"),
			filepath.Join(s.ExeDir, "..", "lib", "edged", Soname),
			filepath.Join(s.ExeDir, "..", "third_party", "onnxruntime", runtime.GOARCH, Soname),
		} {
			if try(p) {
				return filepath.Clean(p), nil
			}
		}
	}
	for _, d := range filepath.SplitList(s.LDLibraryPath) {
		if d != "" && try(filepath.Join(d, Soname)) {
			return filepath.Join(d, Soname), nil
		}
	}
	if s.LDCache != "" {
		paths, err := cachedPaths(s.LDCache, Soname)
		switch {
		case err != nil:
			tried = append(tried, fmt.Sprintf("%s (%v)", s.LDCache, err))
		case len(paths) == 0:
			tried = append(tried, s.LDCache+" (no "+Soname+" listed)")
		}
		for _, p := range paths {
			if try(p) {
				return p, nil
			}
		}
	}
	for _, d := range s.SystemDirs {
		if try(filepath.Join(d, Soname)) {
			return filepath.Join(d, Soname), nil
		}
	}
	return "", fmt.Errorf("%w: %w: %s and $%s are not set; looked for %s in: %s. "+
		"Fix: run `make deps` (it puts the library in third_party/onnxruntime/%s/), "+
		"then set %s=<path to %s> or %s in the config, or install %s next to the edged binary",
		trt.ErrBackend, ErrLibraryNotFound, ConfigKey, EnvLibrary, Soname, strings.Join(tried, ", "),
		runtime.GOARCH, EnvLibrary, Soname, ConfigKey, Soname)
}

func mustExist(p, how string) (string, error) {
	st, err := os.Stat(p)
	if err == nil && st.Mode().IsRegular() {
		return p, nil
	}
	if err == nil {
		err = fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	} else if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("no such file")
	}
	return "", fmt.Errorf("%w: %w: %s (%s): %w; fix the path, or run `make deps` and point it at third_party/onnxruntime/%s/%s",
		trt.ErrBackend, ErrLibraryNotFound, p, how, err, runtime.GOARCH, Soname)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// cachedPaths returns the absolute paths that the loader cache at file
// lists for soname. The cache's string table holds each library's soname
// and its full path as NUL-terminated strings; this picks the paths whose
// base name is soname, which works for the old and the new cache format
// without decoding their entry tables.
func cachedPaths(file, soname string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseCache(data, soname), nil
}

// parseCache returns the absolute paths in the loader cache data whose base
// name is soname.
func parseCache(data []byte, soname string) []string {
	var paths []string
	seen := map[string]bool{}
	for s := range bytes.SplitSeq(data, []byte{0}) {
		// The first string of the table follows binary entries: keep
		// only the printable tail.
		start := len(s)
		for start > 0 && s[start-1] >= 0x20 && s[start-1] < 0x7f {
			start--
		}
		s = s[start:]
		if len(s) < 2 || s[0] != '/' || !bytes.HasSuffix(s, []byte("/"+soname)) {
			continue
		}
		p := string(s)
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	return paths
}
