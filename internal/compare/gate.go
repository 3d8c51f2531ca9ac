package compare

import "fmt"

// Outcome is what a threshold makes of a change.
type Outcome int

// Outcomes of Check.
const (
	// Passed: the whole interval is within the threshold.
	Passed Outcome = iota
	// Crossed: the whole interval is beyond it.
	Crossed
	// Inconclusive: the interval straddles it, or there is no interval to
	// hold it against (Why says which).
	Inconclusive
)

// Verdict is a threshold held against one change.
type Verdict struct {
	Outcome Outcome
	// Low and High bound the interval it was judged on (percent).
	Low, High float64
	// Why says why there was no interval to judge on ("" when there was).
	Why string
}

// Check holds a change against a threshold on it: op '>' fails a growth
// beyond limit percent, '<' a fall below it (limit ≤ 0), on the change's
// interval at level. It passes only what it measured: a change with fewer
// than MinPairs pairs, or whose spread between processes is unknown, is
// Inconclusive with the reason.
func Check(c Change, op byte, limit, level float64) Verdict {
	switch {
	case c.Pairs < MinPairs:
		return Verdict{Outcome: Inconclusive, Why: fmt.Sprintf("%d pairs measured, fewer than the %d a verdict needs", c.Pairs, MinPairs)}
	case c.SpreadUnknown:
		return Verdict{Outcome: Inconclusive, Why: "one process per build and no prior: the spread between processes is unknown"}
	}
	low, high, ok := c.Interval(level)
	if !ok {
		return Verdict{Outcome: Inconclusive, Why: "no interval was computed"}
	}
	v := Verdict{Outcome: Inconclusive, Low: low, High: high}
	switch {
	case op == '>' && low > limit, op == '<' && high < limit:
		v.Outcome = Crossed
	case op == '>' && high <= limit, op == '<' && low >= limit:
		v.Outcome = Passed
	}
	return v
}

// GateLevel is the confidence of the intervals each of m thresholds is
// judged on: Bonferroni over the thresholds, so that a gate fails two
// identical builds in at most Alpha of runs however many it holds.
func GateLevel(m int) float64 {
	return 1 - Alpha/float64(max(m, 1))
}
