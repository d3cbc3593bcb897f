package configs

import _ "embed"

//go:generate go run ./gen

// Default is configs/edged.toml.
//
//go:embed edged.toml
var Default []byte
