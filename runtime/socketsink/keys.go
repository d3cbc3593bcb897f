package socketsink

import (
	"os"
	"path/filepath"
	"time"

	"github.com/edged-dev/edged/internal/confkeys"
)

// SinkKind is the kind as the configuration knows it (registered by the
// binary, cmd/edged/kinds.go): it listens on a Unix socket, which systemd
// may pass it, and holds the socket's path.
var SinkKind = confkeys.SinkKind{
	Name:    Kind,
	New:     func() confkeys.Keys { return new(Keys) },
	Listens: true,
	Holds: func(_ string, k confkeys.Keys, resolve func(string) string) string {
		return Kind + " " + resolve(k.(*Keys).Path)
	},
}

// DefaultMode is a socket's mode when mode is left out.
const DefaultMode = "0660"

// Keys are a socket sink's keys in [[sink]] (configs/edged.toml documents
// them).
type Keys struct {
	Format     string `toml:"format"` // ndjson | cbor
	Path       string `toml:"path"`
	Mode       string `toml:"mode"`
	Group      string `toml:"group"`
	MaxClients int    `toml:"max_clients"`
	// MaxClientsPerUID bounds one peer uid's connections; default
	// MaxClients/2.
	MaxClientsPerUID int               `toml:"max_clients_per_uid"`
	ClientQueue      int               `toml:"client_queue"`
	WriteTimeout     confkeys.Duration `toml:"write_timeout"`
	AllowUIDs        []int             `toml:"allow_uids"`
	AllowGIDs        []int             `toml:"allow_gids"`
	// Keepalive: idle clients get a keepalive record this often.
	Keepalive confkeys.Duration `toml:"keepalive"`
}

// Defaults implements confkeys.Keys.
func (k *Keys) Defaults() {
	confkeys.Default(&k.Path, DefaultPath())
	confkeys.Default(&k.Format, "ndjson")
	confkeys.Default(&k.Mode, DefaultMode)
	if k.MaxClients == 0 {
		k.MaxClients = DefaultMaxClients
	}
	if k.ClientQueue == 0 {
		k.ClientQueue = DefaultClientQueue
	}
	if k.WriteTimeout.Duration == 0 {
		k.WriteTimeout.Duration = DefaultWriteTimeout
	}
	if k.Keepalive.Duration == 0 {
		k.Keepalive.Duration = DefaultKeepalive
	}
	if k.MaxClientsPerUID == 0 {
		k.MaxClientsPerUID = max(1, k.MaxClients/2)
	}
}

// Check implements confkeys.Keys.
func (k *Keys) Check(p confkeys.Problems) {
	confkeys.OneOf(p, "format", k.Format, "ndjson", "cbor")
	if m, err := confkeys.ParseMode(k.Mode); err != nil {
		p.Add("mode", "%v", err)
	} else if m&0o002 != 0 {
		p.Add("mode", "%s lets every user on the machine write to the socket; use \"0660\" with a group", k.Mode)
	}
	if k.MaxClients < 1 || k.MaxClients > 1024 {
		p.Add("max_clients", "must be between 1 and 1024")
	}
	if k.ClientQueue < 1 || k.ClientQueue > 65536 {
		p.Add("client_queue", "must be between 1 and 65536")
	}
	if k.WriteTimeout.Duration <= 0 {
		p.Add("write_timeout", "must be positive")
	}
	if k.MaxClientsPerUID < 1 || k.MaxClientsPerUID > max(k.MaxClients, 1) {
		p.Add("max_clients_per_uid", "must be between 1 and max_clients (%d)", k.MaxClients)
	}
	if k.Keepalive.Duration < 100*time.Millisecond || k.Keepalive.Duration > time.Hour {
		p.Add("keepalive", "must be between 100ms and 1h")
	}
}

// DefaultPath is where a socket sink with no path listens:
// $XDG_RUNTIME_DIR/edged.sock, else edged.sock in the working directory.
func DefaultPath() string {
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return filepath.Join(dir, "edged.sock")
		}
	}
	if abs, err := filepath.Abs("edged.sock"); err == nil {
		return abs
	}
	return "edged.sock"
}
