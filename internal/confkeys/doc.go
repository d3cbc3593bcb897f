// Package confkeys is the vocabulary in which a kind's package states its
// configuration keys without importing the configuration (runtime/config,
// which is above the kinds): the kind declares its keys as a struct whose
// toml tags name them, fills their defaults and checks them, reporting
// each problem at its key to a [Problems] the configuration gives it, which
// locates it at file:line:col and collects every problem of the file at
// once. It imports nothing of edged.
package confkeys
