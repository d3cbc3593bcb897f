package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeSystemctl puts a `systemctl` first on PATH that prints show for any
// `systemctl show`, and returns the PATH to use.
func fakeSystemctl(t *testing.T, show string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncat <<'EOF'\n" + show + "EOF\n"
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// The shipped unit, as systemd 252 shows it.
const shippedUnitShow = "LoadState=loaded\nIPAddressAllow=127.0.0.0/8 ::1/128\nIPAddressDeny=0.0.0.0/0 ::/0\n"

// TestCheckNamesTheUnitsIPFilter: the shipped unit allows IP traffic with
// this machine only (IPAddressDeny=any, IPAddressAllow=localhost). edged
// check asks systemd for the unit's filter and names it: an MQTT broker on
// another machine is a configuration problem (exit 78, with the drop-in
// line that fixes it), a metrics listener on all addresses a warning (only
// this machine can scrape it); a broker on this machine, or one the
// drop-in allows, passes.
func TestCheckNamesTheUnitsIPFilter(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	mqtt := func(host string) []string {
		return []string{`sinks = ["local"]`, `sinks = ["local", "cloud"]`,
			`# Serial (UART) sink:`, "[[sink]]\nname = \"cloud\"\nkind = \"mqtt\"\nurl = \"mqtt://" + host + ":1883\"\n\n# Serial (UART) sink:",
			`metrics_listen = ""`, `metrics_listen = "0.0.0.0:9464"`}
	}
	cases := []struct {
		name, show, host string
		code             int
		want             []string
	}{
		{"remote broker, shipped unit", shippedUnitShow, "192.0.2.10", 78, []string{
			"FAIL  sink cloud (mqtt://192.0.2.10:1883): edged.service refuses connections to 192.0.2.10",
			"Add `IPAddressAllow=192.0.2.10` in a drop-in",
			"warn  daemon.metrics_listen 0.0.0.0:9464: edged.service drops IP traffic from other machines"}},
		{"local broker, shipped unit", shippedUnitShow, "127.0.0.1", 0, []string{
			"ok    sink cloud (mqtt://127.0.0.1:1883): allowed by edged.service's IP filter"}},
		{"remote broker, drop-in allows it", "LoadState=loaded\nIPAddressAllow=127.0.0.0/8 ::1/128 192.0.2.0/24\nIPAddressDeny=0.0.0.0/0 ::/0\n", "192.0.2.10", 0, []string{
			"ok    sink cloud (mqtt://192.0.2.10:1883): allowed",
			"ok    daemon.metrics_listen 0.0.0.0:9464: scrapers allowed by edged.service's IP filter: 127.0.0.0/8 ::1/128 192.0.2.0/24"}},
		{"no unit", "LoadState=not-found\nIPAddressAllow=\nIPAddressDeny=\n", "192.0.2.10", 0, []string{
			"not checked against the unit's IPAddressDeny=: edged.service is not installed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := testConfig(t, dir, mqtt(c.host)...)
			cmd := edged("check", "-config", cfg)
			cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib, "PATH="+fakeSystemctl(t, c.show))
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
		})
	}
}

func TestParseUnitShow(t *testing.T) {
	loaded, f, err := parseUnitShow(shippedUnitShow)
	if err != nil || !loaded {
		t.Fatal(loaded, err)
	}
	for a, denied := range map[string]bool{"127.0.0.1": false, "::1": false, "::ffff:127.0.0.1": false, "10.0.0.1": true, "2001:db8::1": true} {
		if got := f.denies(netip.MustParseAddr(a)); got != denied {
			t.Errorf("denies(%s) = %v", a, got)
		}
	}
	if !f.deniesAll() || f.allowsRemote() {
		t.Errorf("shipped unit: deniesAll %v allowsRemote %v", f.deniesAll(), f.allowsRemote())
	}
	_, open, _ := parseUnitShow("LoadState=loaded\nIPAddressAllow=\nIPAddressDeny=\n")
	if open.denies(netip.MustParseAddr("10.0.0.1")) || open.deniesAll() {
		t.Error("an empty filter denies")
	}
	if _, _, err := parseUnitShow("IPAddressDeny=bogus\n"); err == nil {
		t.Error("a bad prefix parsed")
	}
}

// TestRunNamesTheUnitsIPFilter: started by systemd ($INVOCATION_ID), edged
// asks for its unit's IP filter when the configuration reaches another
// machine, and logs an error naming the broker the filter refuses and a
// warning for a metrics listener only this machine can reach.
func TestRunNamesTheUnitsIPFilter(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	cfg, sock := testConfig(t, dir, `sinks = ["local"]`, `sinks = ["local", "cloud"]`,
		`# Serial (UART) sink:`, "[[sink]]\nname = \"cloud\"\nkind = \"mqtt\"\nurl = \"mqtt://192.0.2.10:1883\"\n\n# Serial (UART) sink:",
		`metrics_listen = ""`, `metrics_listen = "0.0.0.0:0"`)
	d := start(t, lib, cfg, sock, "INVOCATION_ID=0123456789abcdef", "PATH="+fakeSystemctl(t, shippedUnitShow))
	waitLog(t, d, "the unit's IP filter refuses this sink's broker")
	waitLog(t, d, "only this machine can scrape metrics")
	for _, w := range []string{`endpoint="sink cloud (mqtt://192.0.2.10:1883)"`, `denied=192.0.2.10`, `allowed="127.0.0.0/8 ::1/128"`} {
		if !strings.Contains(d.stderr.String(), w) {
			t.Errorf("no %s in the log", w)
		}
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestSignalsDuringStart: a SIGHUP (systemctl reload) or SIGTERM
// (systemctl stop) that came before the daemon ran took the default
// action: edged died by the signal (exit -1 under qemu, where the start
// is slow enough for a test to hit it). Here edged is held in its start
// by a systemctl that does not answer (asked for the unit's IP filter);
// a SIGHUP there is kept, and a SIGTERM stops it with exit 0.
func TestSignalsDuringStart(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "asked")
	bin := t.TempDir()
	script := "#!/bin/sh\n: >" + mark + "\nsleep 20\ncat <<'EOF'\n" + shippedUnitShow + "EOF\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, sock := testConfig(t, dir, `sinks = ["local"]`, `sinks = ["local", "cloud"]`,
		`# Serial (UART) sink:`, "[[sink]]\nname = \"cloud\"\nkind = \"mqtt\"\nurl = \"mqtt://192.0.2.10:1883\"\n\n# Serial (UART) sink:")
	d := start(t, lib, cfg, sock, "INVOCATION_ID=0123456789abcdef", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("edged never asked systemctl about its unit:\n%s", d.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	select {
	case <-d.done:
		t.Fatalf("a SIGHUP during the start ended edged: %v", d.cmd.ProcessState)
	case <-time.After(500 * time.Millisecond):
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("SIGTERM during the start: exit %d (%v), want 0", code, d.cmd.ProcessState)
	}
}
