package config

import "strings"

// closest returns the key of keys that name most likely meant: one that
// differs from it only in case, '_' or '-' (max-clients, maxClients), else
// the nearest by edit distance (insertions, deletions, substitutions and
// swaps of neighbours), at most 1 edit for names of up to 4 characters and
// 2 for longer ones; "" when none is that close or two are equally close.
func closest(name string, keys []string) string {
	squash := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	for _, k := range keys {
		if squash(k) == squash(name) {
			return k
		}
	}
	limit := 1
	if len(name) > 4 {
		limit = 2
	}
	best, bestD, ties := "", limit+1, 0
	for _, k := range keys {
		switch d := editDistance(strings.ToLower(name), k); {
		case d < bestD:
			best, bestD, ties = k, d, 0
		case d == bestD:
			ties++
		}
	}
	if bestD > limit || ties > 0 {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b (bytes):
// Levenshtein's, with a swap of two neighbours counting as one edit.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
