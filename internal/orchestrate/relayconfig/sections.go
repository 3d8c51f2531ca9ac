package relayconfig

import (
	"fmt"
	"slices"
	"strings"
)

// Sections are the top-level keys of Relay 26.4.0's config.yml: the fields
// of ConfigValues in relay-config/src/config.rs. Relay ignores any other
// key without a word, so a typo in an override silently changes nothing.
func Sections() []string {
	return []string{
		"relay", "http", "cache", "spool", "limits", "logging", "routing", "metrics", "sentry", "processing",
		"outcomes", "aggregator", "secondary_aggregators", "auth", "geoip", "normalization",
		"cardinality_limiter", "health", "cogs", "upload",
	}
}

// UnknownSections are c's top-level keys that are not Sections, sorted.
func UnknownSections(c Config) []string {
	known := Sections()
	var out []string
	for k := range c {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// UnknownSection says that key is not one of Relay's config sections, and
// which one it may have meant.
func UnknownSection(key string) string {
	msg := fmt.Sprintf("top-level key %q is not one of Relay 26.4.0's config sections, and Relay ignores it", key)
	if s := closest(key, Sections()); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else {
		msg += " (they are " + strings.Join(Sections(), ", ") + ")"
	}
	return msg
}

// closest is the candidate within two edits of s, or "".
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment): insertions, deletions, substitutions and swaps of
// neighbours cost one each.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
