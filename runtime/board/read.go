package board

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The kinds of problem a read cycle reports; a Problem's Err wraps one.
var (
	// ErrUnreadable: the file is there but reading it failed (permission,
	// EAGAIN from a zone without a sensor, a directory where a file
	// should be).
	ErrUnreadable = errors.New("board: unreadable")
	// ErrGarbage: the file was read but its content is not what the
	// kernel writes there.
	ErrGarbage = errors.New("board: unexpected content")
)

// Paths say where the board's state is read, as node_exporter's
// --path.sysfs, --path.procfs and --path.rootfs do: a container reads the
// host's through mounts such as /host/sys.
type Paths struct {
	Sys  string // sysfs; "" = /sys
	Proc string // procfs; "" = /proc
	Root string // the root file system, for nvpmodel's files; "" = /
}

// WithDefaults returns p with its empty fields set to /sys, /proc and /.
func (p Paths) WithDefaults() Paths {
	if p.Sys == "" {
		p.Sys = "/sys"
	}
	if p.Proc == "" {
		p.Proc = "/proc"
	}
	if p.Root == "" {
		p.Root = "/"
	}
	return p
}

// Problem is a file a read cycle could not use. Its series is not
// exported until the file reads well.
type Problem struct {
	Path string // the file, under its root (e.g. /sys/class/thermal/thermal_zone2/temp)
	What string // what the file holds ("cv0-thermal temperature")
	Err  error  // wraps ErrUnreadable or ErrGarbage
}

func (p Problem) Error() string { return fmt.Sprintf("%s (%s): %v", p.Path, p.What, p.Err) }

func (p Problem) Unwrap() error { return p.Err }

// Snapshot is one read cycle's view of the board. Slices are sorted; a
// field whose Has flag is false was not there.
type Snapshot struct {
	Zones []Zone
	// GPULoad is the GPU's busy share, 0..1 (nvgpu's load, in per mille).
	GPULoad    float64
	HasGPULoad bool
	Freqs      []Freq
	Mode       PowerMode
	Rails      []Rail
	Memory     Memory
	// Took is how long the read cycle took.
	Took time.Duration
}

// Zone is one thermal zone.
type Zone struct {
	Name    string // the metric label: the zone's type, made unique if two zones share it
	Type    string // class/thermal/thermal_zoneN/type
	Dir     string // thermal_zoneN
	Celsius float64
	HasTemp bool
	Trips   []Trip // in the kernel's order
}

// Trip is a trip point of a zone.
type Trip struct {
	Type    string // passive, active, hot, critical
	Celsius float64
}

// Passive returns the zone's first (lowest) passive trip point, where
// the kernel starts to slow the clocks. A passive trip point at or below
// 0 °C is one that was never set (x86_pkg_temp reads 0) and is ignored.
func (z Zone) Passive() (float64, bool) {
	found, lowest := false, 0.0
	for _, t := range z.Trips {
		if t.Type == "passive" && t.Celsius > 0 && (!found || t.Celsius < lowest) {
			found, lowest = true, t.Celsius
		}
	}
	return lowest, found
}

// Freq is the frequency of a clock: the GPU, the EMC, a CPU cluster.
type Freq struct {
	Unit   string // gpu, emc, cpu_policyN
	Hz     float64
	HasHz  bool
	Max    float64 // the highest frequency allowed now (the power mode's cap, thermal limits)
	HasMax bool
}

// PowerMode is nvpmodel's active mode, with every mode its configuration
// defines.
type PowerMode struct {
	ID    int
	Name  string // "" when /etc/nvpmodel.conf does not name it
	Known bool   // /var/lib/nvpmodel/status was read
	Modes []Mode // from /etc/nvpmodel.conf, by ID
}

// Mode is one POWER_MODEL of nvpmodel's configuration.
type Mode struct {
	ID   int
	Name string
}

// Rail is one channel of a power monitor.
type Rail struct {
	Name               string // the channel's label (VDD_IN, VDD_CPU_GPU_CV, …), made unique
	Volts, Amps, Watts float64
	Chip               string // the monitor's I2C device (1-0040)
}

// Memory is /proc/meminfo's MemAvailable and MemTotal and the kernel's
// memory pressure (PSI).
type Memory struct {
	Available, Total uint64
	HasMeminfo       bool
	// Pressure is PSI's "some avg10" as a ratio: the share of the last
	// 10 s in which at least one task waited for memory.
	Pressure    float64
	HasPressure bool
}

// Reader reads the board's state. It is not safe for concurrent use: a
// Monitor owns one; edged check makes its own.
type Reader struct {
	paths           Paths
	sys, proc, root fs.FS
	conf            confCache
}

// NewReader returns a reader of the files under p.
func NewReader(p Paths) *Reader {
	p = p.WithDefaults()
	return &Reader{paths: p, sys: os.DirFS(p.Sys), proc: os.DirFS(p.Proc), root: os.DirFS(p.Root)}
}

// Paths returns where the reader reads.
func (r *Reader) Paths() Paths { return r.paths }

// Read does one read cycle.
func (r *Reader) Read() (Snapshot, []Problem) {
	t0 := time.Now()
	c := cycle{r: r}
	var s Snapshot
	s.Zones = c.zones()
	s.GPULoad, s.HasGPULoad, s.Freqs = c.gpu()
	s.Freqs = append(s.Freqs, c.emc()...)
	s.Freqs = append(s.Freqs, c.cpus()...)
	s.Mode = c.powerMode()
	s.Rails = c.rails()
	s.Memory = c.memory()
	s.Took = time.Since(t0)
	return s, c.problems
}

// cycle is one read cycle: it collects the problems it meets.
type cycle struct {
	r        *Reader
	problems []Problem
}

// tree names one of the reader's roots.
type tree int

const (
	sysfs tree = iota
	procfs
	rootfs
)

func (c *cycle) fsys(t tree) (fs.FS, string) {
	switch t {
	case procfs:
		return c.r.proc, c.r.paths.Proc
	case rootfs:
		return c.r.root, c.r.paths.Root
	}
	return c.r.sys, c.r.paths.Sys
}

// maxFile bounds what is read of one file: sysfs attributes are a page at
// most; nvpmodel.conf is tens of KiB.
const maxFile = 256 << 10

// found says what became of reading a file.
type found uint8

const (
	missing found = iota // not there: not a problem, nothing exported
	failed               // there, but unreadable or garbage: a problem was recorded
	ok                   // read and parsed
)

// read returns the content of name under t. A missing file is not a
// problem; an unreadable one is recorded.
func (c *cycle) read(t tree, name, what string) ([]byte, found) {
	fsys, _ := c.fsys(t)
	f, err := fsys.Open(name)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(f, maxFile+1))
		f.Close()
		if err == nil && len(b) > maxFile {
			err = fmt.Errorf("longer than %d bytes", maxFile)
		}
		if err == nil {
			return b, ok
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missing
	}
	c.unreadable(t, name, what, err)
	return nil, failed
}

func (c *cycle) full(t tree, name string) string {
	_, root := c.fsys(t)
	return filepath.Join(root, filepath.FromSlash(name))
}

func (c *cycle) unreadable(t tree, name, what string, err error) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is the problem's
	}
	msg := fmt.Errorf("%w: %w", ErrUnreadable, err)
	switch {
	case errors.Is(err, fs.ErrPermission) && strings.HasPrefix(name, "kernel/debug/"):
		msg = fmt.Errorf("%w: %w (debugfs is readable by root only)", ErrUnreadable, err)
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENODATA):
		msg = fmt.Errorf("%w: %w (the sensor gives no reading)", ErrUnreadable, err)
	}
	c.problems = append(c.problems, Problem{Path: c.full(t, name), What: what, Err: msg})
}

func (c *cycle) garbage(t tree, name, what string, b []byte) {
	v := strings.TrimSpace(string(b))
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	c.problems = append(c.problems, Problem{Path: c.full(t, name), What: what, Err: fmt.Errorf("%w: %q", ErrGarbage, v)})
}

// text reads a one-line attribute (a zone's type, a rail's label).
func (c *cycle) text(t tree, name, what string) (string, found) {
	b, st := c.read(t, name, what)
	if st != ok {
		return "", st
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, "\n\x00") || len(s) > 128 {
		c.garbage(t, name, what, b)
		return "", failed
	}
	return s, ok
}

// integer reads an attribute that holds one decimal integer.
func (c *cycle) integer(t tree, name, what string) (int64, found) {
	b, st := c.read(t, name, what)
	if st != ok {
		return 0, st
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		c.garbage(t, name, what, b)
		return 0, failed
	}
	return v, ok
}

// ranged reads an integer attribute whose value must be in [lo, hi].
func (c *cycle) ranged(t tree, name, what string, lo, hi int64) (int64, found) {
	v, st := c.integer(t, name, what)
	if st == ok && (v < lo || v > hi) {
		c.garbage(t, name, what, strconv.AppendInt(nil, v, 10))
		return 0, failed
	}
	return v, st
}

// dir lists the names in a folder; a missing folder is empty, an
// unreadable one a problem.
func (c *cycle) dir(t tree, name, what string) []string {
	fsys, _ := c.fsys(t)
	names, err := readDirNames(fsys, name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			c.unreadable(t, name, what, err)
		}
		return nil
	}
	return names
}

// readDirNames returns the names in a folder, sorted.
func readDirNames(fsys fs.FS, name string) ([]string, error) {
	ents, err := fs.ReadDir(fsys, name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// numbered returns the names prefix<N>, sorted by N.
func numbered(names []string, prefix string) []string {
	type entry struct {
		name string
		n    int
	}
	var out []entry
	for _, name := range names {
		rest, found := strings.CutPrefix(name, prefix)
		if !found {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			continue
		}
		out = append(out, entry{name, n})
	}
	slices.SortFunc(out, func(a, b entry) int { return a.n - b.n })
	sorted := make([]string, len(out))
	for i, e := range out {
		sorted[i] = e.name
	}
	return sorted
}

// unique makes names unique: the first keeps its name, a later one with
// the same name gets "@" and what tells it apart.
func unique(seen map[string]bool, name, apart string) string {
	if !seen[name] {
		seen[name] = true
		return name
	}
	n := name + "@" + apart
	seen[n] = true
	return n
}
