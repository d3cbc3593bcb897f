package umem

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCacheEntryRoundTrip(t *testing.T) {
	code := []byte(".version 8.0\n.target sm_90\n\x00")
	b := encodeCacheEntry(code)
	if !bytes.Contains(b, []byte(" 28\n")) {
		t.Fatalf("header %q lacks the length 28", b)
	}
	got, err := parseCacheEntry(b)
	if err != nil || !bytes.Equal(got, code) {
		t.Fatalf("round trip = %q, %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"truncated":  b[:len(b)-3],
		"flipped":    append(append([]byte{}, b[:len(b)-2]...), 'X', 0),
		"no header":  code,
		"empty":      nil,
		"no NUL":     encodeCacheEntry([]byte(".version 8.0")),
		"bad length": bytes.Replace(b, []byte(" 28\n"), []byte(" 27\n"), 1),
	} {
		if _, err := parseCacheEntry(bad); !errors.Is(err, errCacheEntry) {
			t.Errorf("%s: err = %v, want errCacheEntry", name, err)
		}
	}
}

func FuzzParseCacheEntry(f *testing.F) {
	f.Add(encodeCacheEntry([]byte(".version 8.0\n\x00")))
	f.Add([]byte("edged-ptx v1 00 1\n\x00"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		code, err := parseCacheEntry(b)
		if err != nil {
			if !errors.Is(err, errCacheEntry) {
				t.Fatalf("error %v does not wrap errCacheEntry", err)
			}
			return
		}
		if !bytes.Equal(encodeCacheEntry(code), b) {
			t.Fatalf("accepted %q, which does not re-encode to itself", b)
		}
	})
}

func TestCacheKeyInputs(t *testing.T) {
	base := cacheKey("src", nil, "compute_87", 12060)
	for name, k := range map[string]string{
		"source": cacheKey("src2", nil, "compute_87", 12060),
		"arch":   cacheKey("src", nil, "compute_72", 12060),
		"driver": cacheKey("src", nil, "compute_87", 12020),
		"flags":  cacheKey("src", []string{"-lineinfo"}, "compute_87", 12060),
	} {
		if k == base {
			t.Errorf("cache key ignores the %s", name)
		}
	}
	if cacheKey("src", nil, "compute_87", 12060) != base {
		t.Error("cache key not deterministic")
	}
}

// A cache hit needs no NVRTC (this machine has none); a miss without NVRTC
// reports ErrNoNVRTC; a corrupt entry is not used.
func TestCompileCacheWithoutNVRTC(t *testing.T) {
	if _, err := loadNVRTC(""); err == nil {
		t.Skip("NVRTC is present")
	}
	d, _ := openFake(t, orinProps, false)
	dir := t.TempDir()
	_, err := d.Compile("kernel", CompileOptions{CacheDir: dir})
	if !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("miss without NVRTC: %v", err)
	}
	key := cacheKey("kernel", nil, "compute_87", 13000)
	code := []byte(".version 7.4\n\x00")
	if err := writeFileAtomic(filepath.Join(dir, key+".ptx"), encodeCacheEntry(code)); err != nil {
		t.Fatal(err)
	}
	p, err := d.Compile("kernel", CompileOptions{CacheDir: dir})
	if err != nil || !p.FromCache || !bytes.Equal(p.Code, code) || p.Key != key || p.Arch != "compute_87" {
		t.Fatalf("cache hit = %+v, %v", p, err)
	}
	if _, err := d.LoadModule(p.Code); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, key+".ptx"), []byte("edged-ptx v1 junk"), 0o644)
	if _, err := d.Compile("kernel", CompileOptions{CacheDir: dir}); !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("corrupt entry was used: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != key+".ptx" {
			t.Errorf("stray file %s in the cache", e.Name())
		}
	}
}

func TestWriteFileAtomicErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	if err := writeFileAtomic(filepath.Join(file, "sub", "x"), []byte("a")); err == nil {
		t.Error("write below a file succeeded")
	}
	if err := writeFileAtomic(filepath.Join(dir, "x"), []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "x")); string(b) != "abc" {
		t.Errorf("content %q", b)
	}
}

func TestLoadModuleErrorsCarryLog(t *testing.T) {
	d, _ := openFake(t, discreteProps, false)
	// An ELF image is passed as is; the fake rejects it with a JIT log.
	_, err := d.LoadModule([]byte("\x7fELFxx"))
	if !errors.Is(err, Result(218)) || !strings.Contains(err.Error(), "ptxas fatal") || !strings.Contains(err.Error(), "compute_90") {
		t.Errorf("failed load = %v, want CUDA_ERROR_INVALID_PTX with the JIT log and the arch", err)
	}
	if _, err := d.LoadModule(nil); err == nil {
		t.Error("empty image loaded")
	}
	m, err := d.LoadModule([]byte(".version 8.0")) // NUL appended
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kernel("nope"); err == nil {
		t.Error("unknown kernel found")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kernel("sum_u32"); !errors.Is(err, ErrClosed) {
		t.Errorf("Kernel on a closed module: %v", err)
	}
}

func TestArgsLayout(t *testing.T) {
	var a Args
	a.U32(7)
	a.Ptr(0x1000)
	a.F32(1.5)
	a.I32(-1)
	a.U64(9)
	if a.err != nil || a.n != 5 {
		t.Fatal(a.err)
	}
	want := []int32{0, 8, 16, 20, 24}
	for i, w := range want {
		if a.off[i] != w {
			t.Errorf("arg %d at %d, want %d (natural alignment)", i, a.off[i], w)
		}
	}
	if a.arg64(1) != 0x1000 || a.arg64(4) != 9 {
		t.Error("values not stored")
	}
	a.Reset()
	for range maxArgs + 1 {
		a.U64(1)
	}
	if a.err == nil {
		t.Error("too many arguments accepted")
	}
	d, _ := openFake(t, discreteProps, false)
	m, _ := d.LoadModule([]byte("x\x00"))
	k, _ := m.Kernel("sum_u32")
	s := mustStream(t, d)
	if err := k.Launch(s, D1(1), D1(1), 0, &a); err == nil {
		t.Error("launch with an argument overflow succeeded")
	}
}
