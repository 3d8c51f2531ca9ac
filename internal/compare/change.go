package compare

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MinPairs is the fewest pairs a change needs before a verdict or a gate
// may rest on it, and before a precision rule may end a run (Stage1).
const MinPairs = 10

// Level is the confidence of the intervals a Change reports.
const Level = 0.95

// Pairs are the two builds' values of one metric, pair by pair.
type Pairs struct {
	Base, Build []float64
	// Blocks[i] names the processes pair i ran on; nil: all on one pair of
	// processes.
	Blocks []int
}

// Prior is the spread between two processes of one binary expected before
// a run: the standard deviation (a fraction) of what a block's pair of
// processes adds to the log ratios, with the degrees of freedom it weighs
// as (0: no prior, the run's blocks alone).
type Prior struct {
	Spread float64 `json:"spread"`
	DF     float64 `json:"df"`
	// Source says where it comes from, for the report.
	Source string `json:"source"`
}

// Options shape an Estimate.
type Options struct {
	Prior Prior
	// Stage1 > 0 marks a run that a precision rule may end once its
	// interval is narrow enough: the within-block noise is then the larger
	// of the first Stage1 pairs' and all pairs', on Stage1 − 1 degrees of
	// freedom (Stein's two-stage interval), which keeps the stopping rule
	// from picking a lucky stretch.
	Stage1 int
}

// Change is one metric's change of a build against the baseline.
type Change struct {
	Metric string `json:"metric"`
	Pairs  int    `json:"pairs"`
	Blocks int    `json:"blocks"`
	// Pct is the change in percent (the geometric mean of the pairs'
	// ratios); Low and High bound its 95% interval; HalfWidth is the larger
	// distance from Pct to either bound: the resolution the run reached.
	Pct       float64 `json:"change_pct"`
	Low       float64 `json:"low_pct"`
	High      float64 `json:"high_pct"`
	HalfWidth float64 `json:"half_width_pct"`
	// MeanLog is the mean log ratio, SELog its standard error and DF the
	// degrees of freedom of its t: an interval at another level (Interval).
	MeanLog float64 `json:"mean_log"`
	SELog   float64 `json:"se_log"`
	DF      float64 `json:"df"`
	// P is the two-sided p-value of no change.
	P float64 `json:"p"`
	// Spread is the spread between processes the interval holds (percent):
	// the run's own (RunSpread, from its blocks) shrunk toward the prior.
	// SpreadUnknown: neither a prior nor two blocks to estimate it from.
	Spread        float64 `json:"process_spread_pct"`
	RunSpread     float64 `json:"run_spread_pct"`
	SpreadUnknown bool    `json:"spread_unknown,omitempty"`
	// Verdict: VerdictLower or VerdictHigher when the interval excludes no
	// change, else "no change beyond ±X%" (X the half-width); Judge may
	// make it VerdictDescriptive or VerdictNotSignificant.
	Verdict string `json:"verdict"`
}

// Verdicts of a Change besides "no change beyond …".
const (
	VerdictLower       = "lower"
	VerdictHigher      = "higher"
	VerdictTooFewPairs = "too few pairs"
	// VerdictDescriptive: a secondary metric whose change is shown, not
	// judged (the primary did not change, or its spread is unknown).
	VerdictDescriptive = "descriptive"
	// VerdictNotSignificant: a secondary metric whose interval excludes no
	// change but whose p-value the Holm correction does not reject.
	VerdictNotSignificant = "not significant (Holm)"
)

// Changed says whether the verdict calls the change real.
func (c Change) Changed() bool { return c.Verdict == VerdictLower || c.Verdict == VerdictHigher }

// Interval is the change's interval in percent at confidence level (e.g.
// 0.975); ok is false where none was computed.
func (c Change) Interval(level float64) (low, high float64, ok bool) {
	if c.Pairs < 2 || c.DF <= 0 || math.IsNaN(c.SELog) {
		return 0, 0, false
	}
	h := tQuantile(c.DF, level) * c.SELog
	return pct(c.MeanLog - h), pct(c.MeanLog + h), true
}

// term is one variance component of the mean log ratio with the degrees
// of freedom its estimate rests on.
type term struct{ v, df float64 }

// Estimate is the Change of metric from p. Pairs with a value that is not
// positive and finite are left out (a ratio needs both).
func Estimate(metric string, p Pairs, o Options) Change {
	c := Change{Metric: metric, Verdict: VerdictTooFewPairs}
	logs, blk := logRatios(p)
	c.Pairs = len(logs)
	if c.Pairs < 2 || o.Stage1 > 0 && c.Pairs < o.Stage1 {
		return c
	}
	n := float64(c.Pairs)
	g := groupBlocks(logs, blk)
	c.Blocks = len(g.means)
	mean := g.grand

	// Within-block noise; with one pair per block the pairs' own spread
	// holds both it and the processes'.
	msw, dfw := g.ssw/g.dfw, g.dfw
	if g.dfw < 1 {
		_, sd := meanSD(logs)
		msw, dfw = sd*sd, n-1
	}
	if o.Stage1 > 0 {
		_, sd0 := meanSD(logs[:o.Stage1])
		msw, dfw = max(msw, sd0*sd0), float64(o.Stage1-1)
	}
	// shares is Σ(pairs in a block / pairs)²: how much of the processes'
	// spread reaches the mean.
	var shares, sumN2 float64
	for _, k := range g.ns {
		shares += (k / n) * (k / n)
		sumN2 += k * k
	}

	// The run's own estimate of the spread between blocks: the variance
	// component of the blocks' means (method of moments), on k − 1 df.
	k := float64(c.Blocks)
	var msb, n0, tauRun, dfRun float64
	if c.Blocks >= 2 && g.dfw >= 1 {
		for i, m := range g.means {
			msb += g.ns[i] * (m - mean) * (m - mean)
		}
		msb /= k - 1
		n0 = (n - sumN2/n) / (k - 1)
		tauRun, dfRun = (msb-msw)/n0, k-1
		c.RunSpread = 100 * math.Sqrt(max(tauRun, 0))
	}
	prior := o.Prior
	if prior.Spread == 0 && prior.DF == 0 && dfRun == 0 {
		c.SpreadUnknown = true
	}
	// Shrink the run's estimate toward the prior, each weighed by its
	// degrees of freedom; the variance of the mean is then a sum of terms
	// each resting on its own degrees of freedom.
	var w0, wRun float64
	switch {
	case math.IsInf(prior.DF, 1):
		w0 = 1 // a spread known exactly
	case prior.DF+dfRun > 0:
		w0, wRun = prior.DF/(prior.DF+dfRun), dfRun/(prior.DF+dfRun)
	}
	terms := []term{{msw / n, dfw}, {prior.Spread * prior.Spread * shares * w0, prior.DF}}
	if tauRun > 0 {
		// wRun·shares·(msb − msw)/n0, split into its mean squares.
		f := wRun * shares / n0
		terms[0].v -= f * msw
		terms = append(terms, term{f * msb, dfRun})
	}
	c.Spread = 100 * math.Sqrt(w0*prior.Spread*prior.Spread+wRun*max(tauRun, 0))

	var v, denom float64
	for _, t := range terms {
		v += t.v
		if t.v != 0 && t.df > 0 {
			denom += t.v * t.v / t.df
		}
	}
	v = max(v, 0)
	c.MeanLog, c.SELog = mean, math.Sqrt(v)
	c.DF = n - 1
	if denom > 0 {
		c.DF = min(v*v/denom, maxDF)
	}
	c.P = pValue(mean, c.SELog, c.DF)
	h := tQuantile(c.DF, Level) * c.SELog
	c.Pct, c.Low, c.High = pct(mean), pct(mean-h), pct(mean+h)
	c.HalfWidth = max(c.Pct-c.Low, c.High-c.Pct)
	switch {
	case c.Low > 0:
		c.Verdict = VerdictHigher
	case c.High < 0:
		c.Verdict = VerdictLower
	default:
		c.Verdict = fmt.Sprintf("no change beyond ±%.1f%%", c.HalfWidth)
	}
	return c
}

// blocks are log ratios grouped by block.
type blocks struct {
	means, ns []float64
	grand     float64 // the mean over all pairs
	ssw, dfw  float64 // within-block sum of squares and its df
}

func groupBlocks(logs []float64, blk []int) blocks {
	idx := map[int]int{}
	var sums []float64
	var g blocks
	for i, x := range logs {
		j, ok := idx[blk[i]]
		if !ok {
			j = len(sums)
			idx[blk[i]] = j
			sums, g.ns = append(sums, 0), append(g.ns, 0)
		}
		sums[j] += x
		g.ns[j]++
		g.grand += x
	}
	g.grand /= float64(len(logs))
	g.means = make([]float64, len(sums))
	for j := range sums {
		g.means[j] = sums[j] / g.ns[j]
	}
	for i, x := range logs {
		d := x - g.means[idx[blk[i]]]
		g.ssw += d * d
	}
	g.dfw = float64(len(logs) - len(sums))
	return g
}

// logRatios are the log ratios build/base of the pairs with two positive,
// finite values, and each one's block (all 0 for Blocks nil).
func logRatios(p Pairs) (logs []float64, blk []int) {
	for i := range min(len(p.Base), len(p.Build)) {
		a, b := p.Base[i], p.Build[i]
		if a > 0 && b > 0 && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
			logs = append(logs, math.Log(b/a))
			if p.Blocks != nil {
				blk = append(blk, p.Blocks[i])
			} else {
				blk = append(blk, 0)
			}
		}
	}
	return logs, blk
}

// meanSD is the mean and the sample standard deviation of xs (len ≥ 2).
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// pct is a log ratio as a change in percent.
func pct(x float64) float64 { return 100 * math.Expm1(x) }

// maxDF bounds the degrees of freedom given to Student's t: beyond it t is
// the normal distribution to many digits, and gonum's quantile overflows
// far beyond it.
const maxDF = 1e6

// tQuantile is Student's t quantile for a two-sided interval at level.
func tQuantile(df, level float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: min(df, maxDF)}.Quantile(1 - (1-level)/2)
}

// pValue is the two-sided p-value of a mean of 0 given mean, se and df.
func pValue(mean, se, df float64) float64 {
	if se == 0 {
		if mean == 0 {
			return 1
		}
		return 0
	}
	return 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: min(df, maxDF)}.CDF(-math.Abs(mean)/se)
}
