// Package configs holds edged's default configuration and example setups.
// The default is compiled into the binary: `edged run` with no -config runs
// it.
package configs
