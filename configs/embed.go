// Package configs holds edged's default configuration and example setups.
// The default is compiled into the binary: `edged run` with no -config runs
// it.
package configs

import _ "embed"

// Default is configs/edged.toml.
//
//go:embed edged.toml
var Default []byte
