package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/sensors/rtsp"
)

// unitName is the unit edged check asks systemd about.
const unitName = "edged.service"

// endpoint is an address the configuration makes edged use over IP: a
// broker or a network camera it connects to, or the metrics listener
// others connect to.
type endpoint struct {
	what     string // "sink cloud (mqtt://broker:1883)"
	host     string // a name or an address
	incoming bool   // others connect to it (metrics_listen)
}

// networkEndpoints lists what the configuration reaches, or is reached at,
// over IP. A Unix socket is not one: IPAddressDeny= does not apply to it.
func networkEndpoints(cfg *config.Config) []endpoint {
	var eps []endpoint
	for _, s := range cfg.Sinks {
		if s.Kind != mqttsink.Kind {
			continue
		}
		if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
			eps = append(eps, endpoint{what: fmt.Sprintf("sink %s (%s)", s.Name, u.Redacted()), host: u.Hostname()})
		}
	}
	for _, s := range cfg.Sources {
		if s.Kind != rtsp.Kind {
			continue
		}
		if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
			eps = append(eps, endpoint{what: fmt.Sprintf("source %s (%s)", s.Name, rtsp.Redact(s.URL)), host: u.Hostname()})
		}
	}
	if a := cfg.Daemon.MetricsListen; a != "" && !strings.HasPrefix(a, "unix:") {
		host, _, err := net.SplitHostPort(a)
		if err == nil {
			eps = append(eps, endpoint{what: "daemon.metrics_listen " + a, host: host, incoming: true})
		}
	}
	return eps
}

// ipFilter is a unit's IPAddressAllow= and IPAddressDeny= as systemd
// applies them: an address an allow entry matches passes; otherwise one a
// deny entry matches is dropped (connect fails with EPERM; incoming
// packets vanish); anything else passes.
type ipFilter struct {
	allow, deny []netip.Prefix
}

func (f ipFilter) denies(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range f.allow {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range f.deny {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// deniesAll is IPAddressDeny=any (0.0.0.0/0 and ::/0): whatever is not
// allowed is dropped.
func (f ipFilter) deniesAll() bool {
	var v4, v6 bool
	for _, p := range f.deny {
		v4 = v4 || (p.Bits() == 0 && p.Addr().Is4())
		v6 = v6 || (p.Bits() == 0 && p.Addr().Is6())
	}
	return v4 && v6
}

// parseUnitShow reads `systemctl show -p LoadState,IPAddressAllow,IPAddressDeny`.
func parseUnitShow(out string) (loaded bool, f ipFilter, err error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		var list *[]netip.Prefix
		switch k {
		case "LoadState":
			loaded = v == "loaded"
			continue
		case "IPAddressAllow":
			list = &f.allow
		case "IPAddressDeny":
			list = &f.deny
		default:
			continue
		}
		for _, s := range strings.Fields(v) {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, aerr := netip.ParseAddr(s)
				if aerr != nil {
					return false, f, fmt.Errorf("%s=%q: %w", k, v, err)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			*list = append(*list, p)
		}
	}
	return loaded, f, sc.Err()
}

// unitFilter asks systemd for the unit's IP filter; ok is false (with a
// reason) when there is no systemd to ask or no such unit.
func unitFilter(ctx context.Context) (f ipFilter, ok bool, why string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "systemctl", "show", "--property=LoadState,IPAddressAllow,IPAddressDeny", unitName)
	cmd.WaitDelay = time.Second // a child that keeps its stdout open does not hold a stop
	out, err := cmd.Output()
	if err != nil {
		return f, false, fmt.Sprintf("systemctl show %s: %v", unitName, err)
	}
	loaded, f, err := parseUnitShow(string(out))
	switch {
	case err != nil:
		return f, false, fmt.Sprintf("systemctl show %s: %v", unitName, err)
	case !loaded:
		return f, false, unitName + " is not installed"
	}
	return f, true, ""
}

// checkNetwork says whether the unit's IP filter lets the configuration's
// network endpoints through: the shipped unit allows IP traffic with this
// machine only (IPAddressDeny=any, IPAddressAllow=localhost), so a broker
// elsewhere needs an IPAddressAllow= in a drop-in, and a metrics listener
// reachable from elsewhere is reached from this machine only.
func checkNetwork(ctx context.Context, stdout io.Writer, cfg *config.Config, ok, warn func(string, ...any), fail func(int, string, ...any)) {
	eps := networkEndpoints(cfg)
	if len(eps) == 0 {
		ok("no network endpoint configured (no MQTT sink, no network camera, metrics_listen not on TCP): the unit's IPAddressDeny=any fits")
		return
	}
	f, known, why := unitFilter(ctx)
	if !known {
		fmt.Fprintf(stdout, "        not checked against the unit's IPAddressDeny=: %s\n", why)
		return
	}
	for _, ep := range eps {
		addrs, err := resolve(ctx, ep.host)
		if err != nil {
			warn("%s: %v: cannot tell whether %s's IPAddressDeny= lets it through", ep.what, err, unitName)
			continue
		}
		var denied []string
		for _, a := range addrs {
			if f.denies(a) {
				denied = append(denied, a.String())
			}
		}
		switch {
		case ep.incoming && !loopback(addrs) && f.deniesAll() && !f.allowsRemote():
			warn("%s: %s drops IP traffic from other machines (IPAddressDeny=any; allowed: %s): only this machine can scrape it. "+
				"Add `IPAddressAllow=<your Prometheus' address>` in a drop-in (systemctl edit edged; docs/SYSTEMD.md)", ep.what, unitName, prefixes(f.allow))
		case ep.incoming:
			ok("%s: scrapers allowed by %s's IP filter: %s", ep.what, unitName, map[bool]string{true: prefixes(f.allow), false: "any"}[f.deniesAll()])
		case !ep.incoming && len(denied) > 0:
			fail(exitConfig, "%s: %s refuses connections to %s (IPAddressDeny=; allowed: %s): it can never connect. "+
				"Add `IPAddressAllow=%s` in a drop-in (systemctl edit edged; docs/SYSTEMD.md)", ep.what, unitName, strings.Join(denied, ", "), prefixes(f.allow), strings.Join(denied, " "))
		default:
			ok("%s: allowed by %s's IP filter", ep.what, unitName)
		}
	}
}

// allowsRemote: an allow entry covers an address of another machine.
func (f ipFilter) allowsRemote() bool {
	for _, p := range f.allow {
		if !p.Addr().IsLoopback() {
			return true
		}
	}
	return false
}

// loopback: every address is this machine's loopback (a listener only
// this machine can reach anyway).
func loopback(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return false
		}
	}
	return len(addrs) > 0
}

func resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if host == "" {
		return []netip.Addr{netip.IPv4Unspecified()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func prefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "nothing"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}

// warnIPFilter is checkNetwork's verdict in the log of a daemon started by
// systemd ($INVOCATION_ID): a broker the unit's IP filter refuses, or a
// metrics listener only this machine can reach, is named at start instead
// of being found out from connect errors or silent scrapers.
func warnIPFilter(ctx context.Context, cfg *config.Config, log *slog.Logger) {
	if os.Getenv("INVOCATION_ID") == "" {
		return
	}
	var remote []endpoint
	for _, ep := range networkEndpoints(cfg) {
		if addrs, err := resolve(ctx, ep.host); err != nil || !loopback(addrs) {
			remote = append(remote, ep)
		}
	}
	if len(remote) == 0 {
		return
	}
	f, known, why := unitFilter(ctx)
	if !known {
		log.Debug("the unit's IP filter is not known", "why", why)
		return
	}
	for _, ep := range remote {
		addrs, _ := resolve(ctx, ep.host)
		var denied []string
		for _, a := range addrs {
			if f.denies(a) {
				denied = append(denied, a.String())
			}
		}
		switch {
		case !ep.incoming && len(denied) > 0:
			log.Error("the unit's IP filter refuses this sink's broker: it can never connect; add IPAddressAllow= in a drop-in (systemctl edit edged; docs/SYSTEMD.md)",
				"endpoint", ep.what, "unit", unitName, "denied", strings.Join(denied, " "), "allowed", prefixes(f.allow))
		case ep.incoming && f.deniesAll() && !f.allowsRemote():
			log.Warn("the unit's IP filter drops traffic from other machines: only this machine can scrape metrics; add IPAddressAllow=<Prometheus' address> in a drop-in (systemctl edit edged; docs/SYSTEMD.md)",
				"endpoint", ep.what, "unit", unitName, "allowed", prefixes(f.allow))
		}
	}
}
