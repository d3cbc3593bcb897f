package configs

import _ "embed"

// Default is configs/edged.toml.
//
//go:embed edged.toml
var Default []byte
