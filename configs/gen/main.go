package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// unitValue is the first value of key= in a unit file.
func unitValue(file, key string) string {
	f, err := os.Open(file)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			return v
		}
	}
	fail(fmt.Errorf("%s: no %s=", file, key))
	return ""
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen_packaged:", err)
	os.Exit(1)
}

// replace replaces the one line of text that starts with prefix.
func replace(text, prefix, line string) string {
	lines := strings.Split(text, "\n")
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = line
			n++
		}
	}
	if n != 1 {
		fail(fmt.Errorf("configs/edged.toml: %d lines start with %q, want 1", n, prefix))
	}
	return strings.Join(lines, "\n")
}

func main() {
	src, err := os.ReadFile("edged.toml")
	if err != nil {
		fail(err)
	}
	sock := unitValue("../systemd/edged.socket", "ListenStream")
	state := "/var/lib/" + unitValue("../systemd/edged.service", "StateDirectory")
	text := string(src)
	i := strings.Index(text, "\n\n")
	text = `# edged configuration — /etc/edged/edged.toml as installed by the Debian
# package and ` + "`make install`" + `.
#
# Generated from configs/edged.toml (go generate ./configs): the embedded
# default with the paths the systemd units give, so that ` + "`edged check`" + ` run
# by hand resolves them as ` + "`edged run`" + ` under edged.service does:
#   [daemon] state_dir  = the unit's StateDirectory= (` + state + `)
#   [[sink]] path       = edged.socket's ListenStream= (` + sock + `)
# Every key edged understands is listed below with its default value; keys
# for other kinds of sources and sinks are shown commented out. Unknown keys
# are errors. Relative paths are resolved against this file's folder.
# Durations are strings with a unit ("250ms", "5s"). More setups: the
# package's /usr/share/doc/edged/examples/ (configs/examples/ in the
# repository).` + text[i:]
	text = replace(text, `state_dir = ""`, fmt.Sprintf(`state_dir = %q # the unit's StateDirectory=; keeps a copy of each model file's last good version (last-good/), served if the file is unusable at start, and MQTT queues`, state))
	text = replace(text, `path = ""                 # "" = $XDG_RUNTIME_DIR`, fmt.Sprintf(`path = %q # made by edged.socket and handed to edged under edged.service; edged run outside systemd makes it here itself`, sock))
	if err := os.WriteFile("../packaging/edged.toml", []byte(text), 0o644); err != nil {
		fail(err)
	}
}
