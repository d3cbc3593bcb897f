// Package ratelog is the one rate-limited logger of edged: the first line
// of each kind is written, then at most one per [Every], carrying how many
// were suppressed since the last ("suppressed"), so that a failing device
// or a peer, however fast it fails, connects or sends requests, cannot
// flood the journal. The counts are in /metrics.
package ratelog
