// Command gen writes packaging/edged.toml, the configuration the Debian
// package and `make install` put in /etc/edged/edged.toml: configs/edged.toml
// with the paths the systemd units give (the socket edged.socket listens
// on, the state folder edged.service's StateDirectory= makes), so that
// `edged check` run by hand resolves them as `edged run` under the unit
// does. Run by `go generate ./configs` (from configs/); CI fails when the
// file is stale:
//
//	go run ./gen
package main
