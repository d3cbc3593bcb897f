package umem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edged-dev/edged/internal/atomicfile"
	"github.com/edged-dev/edged/internal/regfile"
)

// CompileOptions configure Device.Compile.
type CompileOptions struct {
	// Name is the program name NVRTC uses in messages; "" means "kernel.cu".
	Name string
	// CacheDir holds compiled PTX across starts; "" disables the cache.
	CacheDir string
	// Library is the NVRTC library to load; "" tries libnvrtc.so.13, .12,
	// .11.2 and .so, first through the loader's search path, then in
	// /usr/local/cuda.
	Library string
	// Flags are extra NVRTC options; the architecture option is added.
	Flags []string
}

// PTX is a compiled program.
type PTX struct {
	// Code is the NUL-terminated PTX text, ready for LoadModule.
	Code []byte
	// Arch is the virtual architecture it was compiled for ("compute_87").
	Arch string
	// Key is the cache key: sha256 of the source, flags, architecture and
	// driver version.
	Key string
	// FromCache is true when Code came from CacheDir and NVRTC was not run.
	FromCache bool
	// NVRTC is the NVRTC version that compiled it ("" on a cache hit).
	NVRTC string
	// Log is NVRTC's log (warnings).
	Log string
	// CacheErr is why the PTX could not be written to the cache; the PTX
	// itself is fine.
	CacheErr error
}

// nvrtcLib is the NVRTC surface umem uses.
type nvrtcLib interface {
	version() (major, minor int, err error)
	compile(src, name string, opts []string) (ptx []byte, log string, err error)
}

// nvrtcSonames are tried in order when CompileOptions.Library is "".
var nvrtcSonames = []string{
	"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so",
	"/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
	"/usr/local/cuda/lib64/libnvrtc.so.11.2", "/usr/local/cuda/lib64/libnvrtc.so",
}

const ptxCacheMagic = "edged-ptx v1"

// cacheKey is the hex sha256 of everything that decides the PTX.
func cacheKey(src string, flags []string, arch string, driverVersion int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00arch=%s\x00driver=%d\x00", ptxCacheMagic, arch, driverVersion)
	for _, f := range flags {
		fmt.Fprintf(h, "flag=%s\x00", f)
	}
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil))
}

// Compile compiles CUDA C source with the machine's NVRTC for this exact
// device (compute_XY), or takes the PTX from o.CacheDir when the source,
// flags, architecture and driver version are unchanged. Kernels must be
// declared extern "C".
func (d *Device) Compile(src string, o CompileOptions) (*PTX, error) {
	arch := d.probe.Arch()
	key := cacheKey(src, o.Flags, arch, d.probe.DriverVersion)
	p := &PTX{Arch: arch, Key: key}
	var path string
	if o.CacheDir != "" {
		// Temporaries of a process killed while writing an entry.
		atomicfile.RemoveStale(o.CacheDir)
		path = filepath.Join(o.CacheDir, key+".ptx")
		// Through regfile: a cache entry is small, and a FIFO or a
		// device put in the cache folder must not hang the compile.
		if b, err := regfile.ReadFile(path, maxCacheEntryBytes); err == nil {
			if code, err := parseCacheEntry(b); err == nil {
				p.Code, p.FromCache = code, true
				return p, nil
			}
			// A torn or corrupt entry: compile again and replace it.
		}
	}
	lib, err := loadNVRTC(o.Library)
	if err != nil {
		return nil, err
	}
	major, minor, err := lib.version()
	if err != nil {
		return nil, err
	}
	p.NVRTC = fmt.Sprintf("%d.%d", major, minor)
	name := o.Name
	if name == "" {
		name = "kernel.cu"
	}
	opts := append([]string{"--gpu-architecture=" + arch}, o.Flags...)
	code, log, err := lib.compile(src, name, opts)
	if err != nil {
		if log != "" {
			return nil, fmt.Errorf("umem: NVRTC %s compiling %s for %s: %w\n%s", p.NVRTC, name, arch, err, log)
		}
		return nil, fmt.Errorf("umem: NVRTC %s compiling %s for %s: %w (is the NVRTC older than the GPU?)", p.NVRTC, name, arch, err)
	}
	if len(code) == 0 || code[len(code)-1] != 0 {
		code = append(code, 0)
	}
	p.Code, p.Log = code, log
	if path != "" {
		p.CacheErr = writeFileAtomic(path, encodeCacheEntry(code))
	}
	return p, nil
}

// encodeCacheEntry frames PTX as "edged-ptx v1 <sha256> <len>\n<ptx>".
func encodeCacheEntry(code []byte) []byte {
	sum := sha256.Sum256(code)
	hdr := fmt.Sprintf("%s %s %d\n", ptxCacheMagic, hex.EncodeToString(sum[:]), len(code))
	return append([]byte(hdr), code...)
}

var errCacheEntry = errors.New("umem: bad PTX cache entry")

// maxCacheEntryBytes bounds a cached PTX file read back (a kernel's PTX
// is tens of KiB); a larger one is compiled again and replaced.
const maxCacheEntryBytes = 16 << 20

// parseCacheEntry checks the framing and the checksum and returns the PTX.
func parseCacheEntry(b []byte) ([]byte, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > 256 {
		return nil, fmt.Errorf("%w: no header", errCacheEntry)
	}
	f := strings.Fields(string(b[:nl]))
	if len(f) != 4 || f[0]+" "+f[1] != ptxCacheMagic {
		return nil, fmt.Errorf("%w: header %q", errCacheEntry, b[:nl])
	}
	n, err := strconv.Atoi(f[3])
	body := b[nl+1:]
	if err != nil || n != len(body) || n == 0 {
		return nil, fmt.Errorf("%w: length %q, have %d bytes", errCacheEntry, f[3], len(body))
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != f[2] {
		return nil, fmt.Errorf("%w: checksum mismatch", errCacheEntry)
	}
	if body[len(body)-1] != 0 {
		return nil, fmt.Errorf("%w: PTX not NUL-terminated", errCacheEntry)
	}
	return body, nil
}

// writeFileAtomic writes a cache entry so that a power cut leaves the old
// entry or the new one, never a torn one; it creates the cache folder.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("umem: kernel cache: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("umem: kernel cache %s: %w", path, err)
	}
	return nil
}
