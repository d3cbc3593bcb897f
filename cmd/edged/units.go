package main

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// socketUnit is a systemd .socket unit with a ListenStream= on a path: the
// socket systemd makes and hands to the unit's service.
type socketUnit struct {
	File    string // the unit file
	Name    string // edged.socket
	Service string // the service it activates (Service=, else the unit's name)
	FDName  string // FileDescriptorName=, else the unit's name
}

// unitDirs are where systemd (the system manager) looks for unit files,
// highest priority first; $SYSTEMD_UNIT_PATH replaces them, and a trailing
// ':' in it adds them after its own folders (systemd.unit(5)).
func unitDirs() []string {
	std := []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}
	env, ok := os.LookupEnv("SYSTEMD_UNIT_PATH")
	if !ok || env == "" {
		return std
	}
	var dirs []string
	for _, d := range strings.Split(env, ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if strings.HasSuffix(env, ":") {
		dirs = append(dirs, std...)
	}
	return dirs
}

// socketUnitFor finds the systemd socket unit that listens on path
// (ListenStream=, after its drop-ins), as installed on this machine.
func socketUnitFor(path string) (socketUnit, bool) {
	seen := map[string]bool{}
	var visited []os.FileInfo // /lib and /usr/lib are one folder on merged-/usr systems: read once
	for _, dir := range unitDirs() {
		fi, err := os.Stat(dir)
		if err != nil || slices.ContainsFunc(visited, func(v os.FileInfo) bool { return os.SameFile(v, fi) }) {
			continue
		}
		visited = append(visited, fi)
		files, _ := filepath.Glob(filepath.Join(dir, "*.socket"))
		for _, f := range files {
			name := filepath.Base(f)
			if seen[name] {
				continue // masked by a folder of higher priority
			}
			seen[name] = true
			u, listens := readSocketUnit(f, name)
			if slices.Contains(listens, path) {
				return u, true
			}
		}
	}
	return socketUnit{}, false
}

// readSocketUnit reads the [Socket] section of a unit file and its
// drop-ins (NAME.d/*.conf beside it): the ListenStream= paths, Service=
// and FileDescriptorName=. An empty ListenStream= resets the list, as in
// systemd; %t is the system manager's /run.
func readSocketUnit(file, name string) (socketUnit, []string) {
	u := socketUnit{File: file, Name: name, Service: strings.TrimSuffix(name, ".socket") + ".service", FDName: name}
	var listens []string
	dropins, _ := filepath.Glob(file + ".d/*.conf")
	slices.Sort(dropins)
	for _, f := range append([]string{file}, dropins...) {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		section := ""
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
			if strings.HasPrefix(line, "[") {
				section = line
				continue
			}
			key, val, ok := strings.Cut(line, "=")
			if !ok || section != "[Socket]" {
				continue
			}
			val = strings.ReplaceAll(strings.TrimSpace(val), "%t", "/run")
			switch strings.TrimSpace(key) {
			case "ListenStream":
				if val == "" {
					listens = nil
				} else {
					listens = append(listens, val)
				}
			case "Service":
				u.Service = val
			case "FileDescriptorName":
				u.FDName = val
			}
		}
		fh.Close()
	}
	return u, listens
}
