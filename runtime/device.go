package runtime

import (
	"os"
	"strings"
)

// machineIDPath is read for the default device id; tests replace it.
var machineIDPath = "/etc/machine-id"

// DeviceID returns the device id edged writes into every record: the
// configured one, else the contents of /etc/machine-id (trimmed), else the
// host name. from says which ("config", "machine-id", "hostname").
func DeviceID(configured string) (id, from string) {
	if configured != "" {
		return configured, "config"
	}
	if b, err := os.ReadFile(machineIDPath); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, "machine-id"
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h, "hostname"
	}
	return "unknown", "none"
}
