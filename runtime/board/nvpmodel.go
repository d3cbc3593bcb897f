package board

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nvpmodel keeps the active power mode in its status file ("pmode:0002",
// written by nvpmodel -m and at boot) and names the modes in its
// configuration ("< POWER_MODEL ID=2 NAME=MAXN_SUPER >"), a symbolic link
// to the board's own file under /etc/nvpmodel/.
const (
	nvpStatus = "var/lib/nvpmodel/status"
	nvpConf   = "etc/nvpmodel.conf"
)

// powerMode reads the active mode and names it from the configuration.
func (c *cycle) powerMode() PowerMode {
	var m PowerMode
	m.Modes = c.modes()
	b, st := c.read(rootfs, nvpStatus, "nvpmodel power mode")
	if st != ok {
		return m
	}
	id, good := parseStatus(b)
	if !good {
		c.garbage(rootfs, nvpStatus, "nvpmodel power mode", b)
		return m
	}
	m.ID, m.Known = id, true
	for _, mode := range m.Modes {
		if mode.ID == id {
			m.Name = mode.Name
		}
	}
	return m
}

// parseStatus finds the mode number in nvpmodel's status file: a token
// "pmode:NNNN" (other tokens, such as a fan mode, may follow).
func parseStatus(b []byte) (int, bool) {
	for _, tok := range strings.Fields(string(b)) {
		v, found := strings.CutPrefix(tok, "pmode:")
		if !found {
			continue
		}
		id, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return 0, false
		}
		return int(id), true
	}
	return 0, false
}

// confCache keeps the modes of the configuration last parsed, by the
// file's path, size and modification time: it is tens of KiB and rarely
// changes, while the status is read every cycle.
type confCache struct {
	name  string
	size  int64
	mtime time.Time
	modes []Mode
}

// modes reads the POWER_MODEL definitions of nvpmodel's configuration.
func (c *cycle) modes() []Mode {
	name, err := c.resolve(nvpConf)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.unreadable(rootfs, nvpConf, "nvpmodel configuration", err)
		}
		return nil
	}
	fsys, _ := c.fsys(rootfs)
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.unreadable(rootfs, name, "nvpmodel configuration", err)
		}
		return nil
	}
	cc := &c.r.conf
	if cc.name == name && cc.size == fi.Size() && cc.mtime.Equal(fi.ModTime()) {
		return cc.modes
	}
	b, st := c.read(rootfs, name, "nvpmodel configuration")
	if st != ok {
		return nil
	}
	modes, good := parseConf(b)
	if !good {
		c.garbage(rootfs, name, "nvpmodel configuration (no POWER_MODEL)", b[:min(len(b), 40)])
		return nil
	}
	*cc = confCache{name: name, size: fi.Size(), mtime: fi.ModTime(), modes: modes}
	return modes
}

// resolve follows symbolic links from name within the root file system: an
// absolute target (/etc/nvpmodel/nvpmodel_p3767_0000.conf) is taken under
// the root, so a container that mounts the host's root at /host reads the
// host's file.
func (c *cycle) resolve(name string) (string, error) {
	fsys, _ := c.fsys(rootfs)
	for range 8 {
		target, err := fs.ReadLink(fsys, name)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) {
				// Not a link (EINVAL), or a file system without links:
				// name is the file.
				return name, nil
			}
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			name = strings.TrimLeft(path.Clean(target), "/")
		} else {
			name = path.Join(path.Dir(name), target)
		}
		if !fs.ValidPath(name) {
			return "", fs.ErrNotExist // a link out of the root
		}
	}
	return "", fs.ErrInvalid // a loop
}

// parseConf returns the modes of an nvpmodel configuration, sorted by ID:
// the lines "< POWER_MODEL ID=<n> NAME=<name> >". ok is false when it has
// none (not an nvpmodel configuration).
func parseConf(b []byte) (modes []Mode, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		inner, found := strings.CutPrefix(line, "<")
		if !found {
			continue
		}
		inner, found = strings.CutSuffix(inner, ">")
		if !found {
			continue
		}
		f := strings.Fields(inner)
		if len(f) == 0 || f[0] != "POWER_MODEL" {
			continue
		}
		m, good := Mode{ID: -1}, true
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ID":
				id, err := strconv.ParseUint(v, 10, 16)
				good = good && err == nil
				m.ID = int(id)
			case "NAME":
				m.Name = v
			}
		}
		if good && m.ID >= 0 && !slices.ContainsFunc(modes, func(x Mode) bool { return x.ID == m.ID }) {
			modes = append(modes, m)
		}
	}
	slices.SortFunc(modes, func(a, b Mode) int { return a.ID - b.ID })
	return modes, len(modes) > 0
}
