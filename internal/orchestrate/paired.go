package orchestrate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MinPairs is how many pairs a comparison measures before the precision
// rule may end it; their spread also sets the interval of a run the rule
// may end (pairedChangeStopped).
const MinPairs = 10

// Change is one metric's change of a build against the baseline, from
// pairs measured back to back: the geometric mean of the per-pair ratios
// build/baseline, with a 95% confidence interval from Student's t on the
// log ratios.
type Change struct {
	Metric string `json:"metric"`
	Pairs  int    `json:"pairs"`
	// Pct is the change in percent; Low and High bound its 95% interval;
	// HalfWidth is the larger distance from Pct to either bound: the
	// resolution the run reached.
	Pct       float64 `json:"change_pct"`
	Low       float64 `json:"low_pct"`
	High      float64 `json:"high_pct"`
	HalfWidth float64 `json:"half_width_pct"`
	// Verdict is "lower" or "higher" when the interval excludes no change,
	// else "no change beyond ±X%" (X the half-width); "too few pairs" with
	// fewer than two.
	Verdict string `json:"verdict"`
}

// Verdicts of a Change besides "no change beyond …".
const (
	VerdictLower       = "lower"
	VerdictHigher      = "higher"
	VerdictTooFewPairs = "too few pairs"
)

// DefaultProcessNoise is Config.ProcessNoise when it is 0: the spread, as
// a fraction, of the difference in CPU per envelope between two processes
// of one binary measured side by side for their whole life. It is the
// smallest (in steps of 0.2%) at which comparisons drawn from every
// recorded A/A pair of Relay processes call a change in at most 5% of runs
// (BenchmarkVerdictCalibrationBlocks), above the spread those pairs show
// as a standard deviation (TestDefaultProcessNoise): a few pairs of
// processes differ by far more than most.
const DefaultProcessNoise = 0.03

// pairedChange is the Change of metric from pairs of (baseline, build)
// values. Pairs with a value that is not positive are left out (a ratio
// needs both).
func pairedChange(metric string, base, build []float64) Change {
	return pairedChangeFrom(metric, base, build, nil, 0, 0)
}

// pairedChangeStopped is pairedChange for a run that a precision rule may
// end once the interval is narrow enough: stopping on the plain interval
// calls an A/A run a change more often than 5%
// (TestPrecisionStopFalsePositives). Its interval takes Student's t with
// the first MinPairs pairs' degrees of freedom and the larger of their
// spread and all pairs' (a two-stage interval in the manner of Stein's).
func pairedChangeStopped(metric string, base, build []float64) Change {
	return pairedChangeFrom(metric, base, build, nil, MinPairs, 0)
}

// pairedChangeFrom is pairedChange with, for n0 > 0, the two-stage
// interval over the first n0 pairs, and with process (a fraction) the
// spread of what the two builds' processes differ by for their whole
// life, or the spread the pairs' own blocks show (blockSpread) where that
// is larger. Pairs measured on the same two processes cannot shrink that
// spread; blocks[i] names the processes pair i was measured on (nil: one
// block), and each block's processes are a fresh draw, so the spread
// enters the interval's variance weighted by Σ(share of the pairs in
// each block)²: as it is for one block, divided by k for k equal ones.
func pairedChangeFrom(metric string, base, build []float64, blocks []int, n0 int, process float64) Change {
	c := Change{Metric: metric, Verdict: VerdictTooFewPairs}
	logs, blk := logRatios(base, build, blocks)
	c.Pairs = len(logs)
	if c.Pairs < 2 {
		return c
	}
	mean, sd := meanSD(logs)
	df := float64(c.Pairs - 1)
	if n0 > 0 {
		if c.Pairs < n0 {
			return c
		}
		_, sd0 := meanSD(logs[:n0])
		sd, df = max(sd, sd0), float64(n0-1)
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(0.975)
	inBlock := map[int]float64{}
	for _, b := range blk {
		inBlock[b]++
	}
	var shares float64
	for _, n := range inBlock {
		shares += (n / float64(c.Pairs)) * (n / float64(c.Pairs))
	}
	// Where the run's own blocks show the processes differing by more (on
	// another machine, say, or in a metric with no spread set), that is
	// what the interval holds.
	process = max(process, spread(logs, blk))
	h := t * math.Sqrt(sd*sd/float64(c.Pairs)+process*process*shares)
	pct := func(x float64) float64 { return 100 * math.Expm1(x) }
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

// blockSpread is the standard deviation (a fraction) of what the blocks'
// processes add to the log ratios build/base beyond the pairs' own noise:
// the DerSimonian–Laird estimate over the blocks' means, each weighted by
// its pairs over the pooled within-block variance. 0 with fewer than
// three blocks of two pairs or more.
func blockSpread(base, build []float64, blocks []int) float64 {
	return spread(logRatios(base, build, blocks))
}

// logRatios are the log ratios build/base of the pairs with two positive,
// finite values, and each one's block (all 0 for blocks nil).
func logRatios(base, build []float64, blocks []int) (logs []float64, blk []int) {
	for i := range min(len(base), len(build)) {
		if base[i] > 0 && build[i] > 0 && !math.IsInf(base[i], 0) && !math.IsInf(build[i], 0) {
			logs = append(logs, math.Log(build[i]/base[i]))
			if blocks != nil {
				blk = append(blk, blocks[i])
			} else {
				blk = append(blk, 0)
			}
		}
	}
	return logs, blk
}

// spread is blockSpread of log ratios and their blocks.
func spread(logs []float64, blk []int) float64 {
	byBlock := map[int][]float64{}
	var order []int
	for i, x := range logs {
		if byBlock[blk[i]] == nil {
			order = append(order, blk[i])
		}
		byBlock[blk[i]] = append(byBlock[blk[i]], x)
	}
	var ss, df float64
	var means, ns []float64
	for _, b := range order {
		if xs := byBlock[b]; len(xs) >= 2 {
			m, sd := meanSD(xs)
			ss += sd * sd * float64(len(xs)-1)
			df += float64(len(xs) - 1)
			means, ns = append(means, m), append(ns, float64(len(xs)))
		}
	}
	if len(means) < 3 {
		return 0
	}
	within := ss / df
	if within == 0 {
		// No noise within the blocks: all their difference is the processes'.
		_, sd := meanSD(means)
		return sd
	}
	var s1, s2, mw float64
	for i, m := range means {
		w := ns[i] / within
		s1, s2, mw = s1+w, s2+w*w, mw+w*m
	}
	mw /= s1
	var q float64
	for i, m := range means {
		q += ns[i] / within * (m - mw) * (m - mw)
	}
	tau2 := (q - float64(len(means)-1)) / (s1 - s2/s1)
	return math.Sqrt(max(tau2, 0))
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
