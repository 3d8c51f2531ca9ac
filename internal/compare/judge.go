package compare

import "sort"

// Alpha is the false-positive rate the verdicts of one comparison allow
// together, across every metric given a verdict.
const Alpha = 1 - Level

// Judge gives the verdicts of one comparison's changes, the primary metric
// first. The primary keeps its own (its interval at Level). The others are
// judged only when the primary changed, Holm-corrected at Alpha together,
// and are VerdictDescriptive otherwise: a serial gatekeeping procedure, so
// that a run of two identical builds calls any metric changed in at most
// Alpha of runs. A metric whose spread between processes is unknown is
// descriptive too.
func Judge(cs []Change) {
	if len(cs) == 0 {
		return
	}
	if cs[0].SpreadUnknown && cs[0].Pairs >= 2 {
		cs[0].Verdict = VerdictDescriptive
	}
	var rest []int
	for i := 1; i < len(cs); i++ {
		switch {
		case cs[i].Pairs < 2 || cs[i].Verdict == VerdictTooFewPairs:
		case !cs[0].Changed() || cs[i].SpreadUnknown:
			cs[i].Verdict = VerdictDescriptive
		default:
			rest = append(rest, i)
		}
	}
	sort.SliceStable(rest, func(a, b int) bool { return cs[rest[a]].P < cs[rest[b]].P })
	rejecting := true
	for j, i := range rest {
		rejecting = rejecting && cs[i].P <= Alpha/float64(len(rest)-j)
		switch {
		case rejecting && cs[i].MeanLog > 0:
			cs[i].Verdict = VerdictHigher
		case rejecting:
			cs[i].Verdict = VerdictLower
		case cs[i].Changed():
			cs[i].Verdict = VerdictNotSignificant
		}
	}
}

// Rule says in one line how Judge gives the verdicts, for under a table.
func Rule(primary string) string {
	return primary + " is judged at 5%; the other metrics are judged (Holm-corrected, 5% together) only when it changed, and are descriptive otherwise."
}
