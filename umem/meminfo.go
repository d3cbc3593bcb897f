package umem

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// ErrMeminfo is wrapped by errors about /proc/meminfo.
var ErrMeminfo = errors.New("umem: bad /proc/meminfo")

// Meminfo holds the /proc/meminfo fields umem uses, in bytes. On Jetson
// the GPU allocates from the same DRAM, so MemAvailable is the budget that
// frames and engines share.
type Meminfo struct {
	MemTotal, MemFree, MemAvailable, SwapFree uint64
	// NvMapMemUsed is Tegra's nvmap usage (GPU allocations), 0 elsewhere.
	NvMapMemUsed uint64
}

// maxMeminfo bounds the read of /proc/meminfo (a few KiB in practice).
const maxMeminfo = 64 << 10

// meminfoBuf is the one read buffer, under its lock: ReadMeminfo runs on
// every metrics scrape and every reload's memory check, and a 64 KiB
// buffer each time was most of what a scrape allocated. (A sync.Pool
// would do, but drops buffers at random under the race detector.)
var meminfoBuf struct {
	sync.Mutex
	b [maxMeminfo]byte
}

// ReadMeminfo reads procRoot/meminfo ("" means /proc) with one bounded read.
func ReadMeminfo(procRoot string) (Meminfo, error) {
	if procRoot == "" {
		procRoot = "/proc"
	}
	path := filepath.Join(procRoot, "meminfo")
	f, err := os.Open(path)
	if err != nil {
		return Meminfo{}, fmt.Errorf("umem: %w", err)
	}
	defer f.Close()
	meminfoBuf.Lock()
	defer meminfoBuf.Unlock()
	buf := meminfoBuf.b[:]
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Meminfo{}, fmt.Errorf("umem: read %s: %w", path, err)
	}
	m, err := parseMeminfo(buf[:n])
	if err != nil {
		return Meminfo{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseMeminfo parses the text of /proc/meminfo, read by the caller (the
// board monitor reads it through its own procfs root).
func ParseMeminfo(b []byte) (Meminfo, error) { return parseMeminfo(b) }

// parseMeminfo parses lines of the form "MemAvailable:   123456 kB".
// Unknown keys are ignored; MemTotal and MemAvailable are required.
func parseMeminfo(b []byte) (Meminfo, error) {
	var m Meminfo
	var seenTotal, seenAvail bool
	for line := range bytes.Lines(b) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return Meminfo{}, fmt.Errorf("%w: line %q has no key", ErrMeminfo, line)
		}
		key := line[:colon]
		var dst *uint64
		switch string(key) {
		case "MemTotal":
			dst, seenTotal = &m.MemTotal, true
		case "MemFree":
			dst = &m.MemFree
		case "MemAvailable":
			dst, seenAvail = &m.MemAvailable, true
		case "SwapFree":
			dst = &m.SwapFree
		case "NvMapMemUsed":
			dst = &m.NvMapMemUsed
		default:
			continue
		}
		fields := bytes.Fields(line[colon+1:])
		if len(fields) == 0 || len(fields) > 2 {
			return Meminfo{}, fmt.Errorf("%w: %s: want a number and an optional unit, got %q", ErrMeminfo, key, line[colon+1:])
		}
		v, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return Meminfo{}, fmt.Errorf("%w: %s: %w", ErrMeminfo, key, err)
		}
		mult := uint64(1)
		if len(fields) == 2 {
			if !bytes.EqualFold(fields[1], []byte("kB")) {
				return Meminfo{}, fmt.Errorf("%w: %s: unknown unit %q", ErrMeminfo, key, fields[1])
			}
			mult = 1024
		}
		if v > (1<<64-1)/mult {
			return Meminfo{}, fmt.Errorf("%w: %s: %d kB overflows", ErrMeminfo, key, v)
		}
		*dst = v * mult
	}
	if !seenTotal || !seenAvail {
		return Meminfo{}, fmt.Errorf("%w: MemTotal or MemAvailable missing (kernel older than 3.14?)", ErrMeminfo)
	}
	return m, nil
}
