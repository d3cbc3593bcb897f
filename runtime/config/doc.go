// Package config is edged's configuration: the schema (one TOML file:
// [daemon], [gpu], [[source]], [[model]], [[pipeline]], [[sink]]), its
// defaults (configs/edged.toml documents each), and a strict loader that
// reports every problem of a file at once, each as file:line:column and
// key path: unknown keys, values of the wrong type (the rest of the file
// is still decoded and checked), values out of range and references to
// names that do not exist. CheckFiles checks that model files are there.
//
// Whether a pipeline fits its engine needs the engine, and is decided by
// package runtime (CheckPipeline); Problem lets it, and the memory check,
// report at the keys that decide them, with this package's positions.
package config
