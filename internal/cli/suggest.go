package cli

import (
	"flag"
	"strings"
)

// Suggest is the flag of fs that name (given without dashes) was most
// likely meant to be, "" when none is close: a name at most two edits away
// (one for names of four letters or fewer; swapping two neighbours is one
// edit, '_' counts as '-'), else the one flag that name is the start of,
// else the longest flag that name starts with (--outdir: --out). On a tie
// the first in fs's order wins.
func Suggest(fs *flag.FlagSet, name string) string {
	name = strings.ReplaceAll(strings.ToLower(name), "_", "-")
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	best, bestD := "", limit+1
	var longer []string // flags that start with name
	within := ""        // the longest flag that name starts with
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			longer = append(longer, f.Name)
		}
		if len(f.Name) >= 3 && strings.HasPrefix(name, f.Name) && len(f.Name) > len(within) {
			within = f.Name
		}
	})
	switch {
	case best != "":
		return best
	case len(longer) == 1:
		return longer[0]
	}
	return within
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
