package orchestrate

import (
	"math"
	"slices"
)

// Change verdicts of a Comparison.
const (
	ChangeWithinNoise = "within noise"
	ChangeLower       = "lower"
	ChangeHigher      = "higher"
)

// MinRoundsForNoise is how many rounds of each build a comparison needs
// before it says whether a change is beyond noise.
const MinRoundsForNoise = 3

// noiseVerdict says whether the rounds b differ from the rounds a beyond
// noise, by two rules that must both hold: the two ranges do not overlap
// (every round of one build is above every round of the other), and, the
// exact two-sided Mann–Whitney U test (the rank test benchstat uses) gives
// p < 0.05 — which needs at least 4 rounds of each: with 3 and 3 the
// smallest p is 0.1, so 3 rounds decide by the ranges alone. It returns
// the verdict ("" with fewer than MinRoundsForNoise rounds each) and p.
func noiseVerdict(a, b []float64) (string, float64) {
	if len(a) < MinRoundsForNoise || len(b) < MinRoundsForNoise {
		return "", math.NaN()
	}
	p := mannWhitneyP(a, b)
	lower := slices.Max(b) < slices.Min(a)
	higher := slices.Min(b) > slices.Max(a)
	significant := p < 0.05 || len(a) < 4 || len(b) < 4
	switch {
	case lower && significant:
		return ChangeLower, p
	case higher && significant:
		return ChangeHigher, p
	}
	return ChangeWithinNoise, p
}

// mannWhitneyP is the exact two-sided p-value of the Mann–Whitney U test
// for samples a and b (ties count one half), from the distribution of U
// over all rank assignments; for the few rounds of a sweep that is exact
// and cheap.
func mannWhitneyP(a, b []float64) float64 {
	n, m := len(a), len(b)
	// U counts the pairs (x in a, y in b) with x > y, ties as one half;
	// twice U is an integer.
	u2 := 0
	for _, x := range a {
		for _, y := range b {
			switch {
			case x > y:
				u2 += 2
			case x == y:
				u2++
			}
		}
	}
	// counts[i][j][u] = number of arrangements of i a's and j b's with U = u
	// (no ties), built from the last element being an a (it is above all
	// j b's) or a b.
	counts := make([][][]float64, n+1)
	for i := range counts {
		counts[i] = make([][]float64, m+1)
		for j := range counts[i] {
			counts[i][j] = make([]float64, i*j+1)
			switch {
			case i == 0 || j == 0:
				counts[i][j][0] = 1
			default:
				for u := range counts[i][j] {
					if u-j >= 0 && u-j < len(counts[i-1][j]) {
						counts[i][j][u] += counts[i-1][j][u-j]
					}
					if u < len(counts[i][j-1]) {
						counts[i][j][u] += counts[i][j-1][u]
					}
				}
			}
		}
	}
	dist := counts[n][m]
	var total, below, above float64
	for u, c := range dist {
		total += c
		if 2*u <= u2 {
			below += c
		}
		if 2*u >= u2 {
			above += c
		}
	}
	return math.Min(1, 2*math.Min(below, above)/total)
}
