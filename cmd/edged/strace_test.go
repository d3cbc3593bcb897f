package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The system calls traced by traceCmd: every way a process reaches
// another (connect, an address on sendto/sendmsg) and every way it makes,
// changes or removes a name in the file system (bind of a Unix socket
// makes its file).
const tracedCalls = "connect,sendto,sendmsg,bind,open,openat,openat2,creat,mkdir,mkdirat,mknod,mknodat," +
	"rename,renameat,renameat2,link,linkat,symlink,symlinkat,unlink,unlinkat,rmdir,truncate"

// needStrace returns strace's path, skipping the test when it is missing
// or cannot trace here (ptrace refused), unless EDGED_REQUIRE_STRACE=1
// (CI), which makes either a failure.
func needStrace(t *testing.T) string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("EDGED_REQUIRE_STRACE") == "1" {
		fail = t.Fatalf
	}
	if os.Getenv("EDGED_EXEC_WRAPPER") != "" {
		// Under qemu-user strace would trace the emulator, not edged.
		t.Skip("strace checks run on the host architecture only (EDGED_EXEC_WRAPPER is set)")
	}
	p, err := exec.LookPath("strace")
	if err != nil {
		fail("strace not installed (apt-get install strace); EDGED_REQUIRE_STRACE=1 makes this a failure")
		return ""
	}
	if out, err := exec.Command(p, "-f", "-qq", "-e", "trace=none", "true").CombinedOutput(); err != nil {
		fail("strace cannot trace here (%v: %s); EDGED_REQUIRE_STRACE=1 makes this a failure", err, out)
	}
	return p
}

// traceCmd wraps cmd so that strace writes one file per thread,
// prefix.<tid> (-ff: no call is split across lines), with the paths of
// file descriptors (-y).
func traceCmd(strace, prefix string, cmd *exec.Cmd) *exec.Cmd {
	args := append([]string{"-ff", "-qq", "-y", "-s", "256", "-o", prefix, "-e", "trace=" + tracedCalls, cmd.Path}, cmd.Args[1:]...)
	c := exec.Command(strace, args...)
	c.Env, c.Dir, c.Stdout, c.Stderr = cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr
	return c
}

// sysCall is one traced call: its name, its arguments and what it returned.
type sysCall struct {
	file, name, args, ret string
}

var callLine = regexp.MustCompile(`^([a-z0-9_]+)\((.*)\)\s+=\s+(.*)$`)

// readTrace parses every file prefix.* that traceCmd wrote.
func readTrace(t *testing.T, prefix string) []sysCall {
	t.Helper()
	files, _ := filepath.Glob(prefix + ".*")
	if len(files) == 0 {
		t.Fatalf("strace wrote no %s.* files", prefix)
	}
	var calls []sysCall
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if m := callLine.FindStringSubmatch(sc.Text()); m != nil {
				calls = append(calls, sysCall{file: filepath.Base(f), name: m[1], args: m[2], ret: m[3]})
			}
		}
		fh.Close()
	}
	return calls
}

func (c sysCall) ok() bool { return !strings.HasPrefix(c.ret, "-1") && !strings.HasPrefix(c.ret, "?") }
func (c sysCall) String() string {
	return fmt.Sprintf("%s: %s(%s) = %s", c.file, c.name, c.args, c.ret)
}

var (
	unixAddr  = regexp.MustCompile(`sa_family=AF_UNIX, sun_path=(@?)"([^"]*)"`)
	inetAddr  = regexp.MustCompile(`sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)`)
	inet6Addr = regexp.MustCompile(`sa_family=AF_INET6, sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, "([^"]+)"`)
	anyFamily = regexp.MustCompile(`sa_family=(AF_[A-Z0-9]+)`)
)

// peers returns, for every successful or attempted connect and every
// addressed sendto/sendmsg, the peer as "unix:PATH", "unix:@NAME",
// "tcp-or-udp:HOST:PORT" or "AF_X:?" for another family.
func peers(calls []sysCall) map[string][]sysCall {
	out := map[string][]sysCall{}
	for _, c := range calls {
		if c.name != "connect" && c.name != "sendto" && c.name != "sendmsg" {
			continue
		}
		for _, fam := range anyFamily.FindAllStringSubmatch(c.args, -1) {
			var peer string
			switch fam[1] {
			case "AF_UNIX":
				if m := unixAddr.FindStringSubmatch(c.args); m != nil {
					peer = "unix:" + m[1] + m[2]
				}
			case "AF_INET":
				if m := inetAddr.FindStringSubmatch(c.args); m != nil {
					peer = "ip:" + m[2] + ":" + m[1]
				}
			case "AF_INET6":
				if m := inet6Addr.FindStringSubmatch(c.args); m != nil {
					peer = "ip:" + strings.TrimPrefix(m[2], "::ffff:") + ":" + m[1]
				}
			case "AF_UNSPEC":
				continue // disconnects a datagram socket: reaches nobody
			}
			if peer == "" {
				peer = fam[1] + ":?"
			}
			out[peer] = append(out[peer], c)
		}
	}
	return out
}

var (
	quoted   = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	dirFD    = regexp.MustCompile(`^(?:AT_FDCWD|\d+)<([^>]*)>$`)
	writeish = regexp.MustCompile(`O_(?:CREAT|WRONLY|RDWR|TRUNC|APPEND)\b`)
)

// changedPaths returns the absolute paths that successful calls created,
// opened for writing, renamed, linked or removed, with the call; cwd
// resolves a path relative to AT_FDCWD when strace did not print it.
func changedPaths(calls []sysCall, cwd string) map[string][]sysCall {
	out := map[string][]sysCall{}
	add := func(p string, c sysCall) { out[filepath.Clean(p)] = append(out[filepath.Clean(p)], c) }
	for _, c := range calls {
		if !c.ok() {
			continue
		}
		args := splitArgs(c.args)
		// path resolves argument i (a path), relative to the directory fd
		// in argument i-1 for the *at calls.
		path := func(i int, at bool) string {
			if i >= len(args) {
				return ""
			}
			m := quoted.FindStringSubmatch(args[i])
			if m == nil {
				return ""
			}
			p := m[1]
			if filepath.IsAbs(p) {
				return p
			}
			base := cwd
			if at && i > 0 {
				if d := dirFD.FindStringSubmatch(strings.TrimSpace(args[i-1])); d != nil {
					base = d[1]
				}
			}
			return filepath.Join(base, p)
		}
		switch c.name {
		case "open", "creat":
			if c.name == "creat" || (len(args) > 1 && writeish.MatchString(args[1])) {
				add(path(0, false), c)
			}
		case "openat", "openat2":
			if len(args) > 2 && writeish.MatchString(args[2]) {
				add(path(1, true), c)
			}
		case "mkdir", "mknod", "rmdir", "unlink", "truncate":
			add(path(0, false), c)
		case "mkdirat", "mknodat", "unlinkat":
			add(path(1, true), c)
		case "rename", "link", "symlink":
			add(path(0, false), c)
			add(path(1, false), c)
		case "renameat", "renameat2", "linkat":
			add(path(1, true), c)
			add(path(3, true), c)
		case "symlinkat":
			add(path(2, true), c)
		case "bind":
			if m := unixAddr.FindStringSubmatch(c.args); m != nil && m[1] == "" {
				add(m[2], c)
			}
		}
	}
	delete(out, ".")
	return out
}

// splitArgs splits a call's arguments at the commas outside quotes,
// braces and brackets.
func splitArgs(s string) []string {
	var out []string
	depth, inQ, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQ && c == '\\':
			i++
		case c == '"':
			inQ = !inQ
		case inQ:
		case c == '{' || c == '[' || c == '(' || c == '<':
			depth++
		case c == '}' || c == ']' || c == ')' || c == '>':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// emptyDirs fails for every file found under the folders.
func emptyDirs(t *testing.T, dirs map[string]string) {
	t.Helper()
	for k, d := range dirs {
		var found []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if p != d {
				found = append(found, p)
			}
			return nil
		})
		if len(found) > 0 {
			t.Errorf("%s (%s) is not empty afterwards: %s", k, d, strings.Join(found, ", "))
		}
	}
}
