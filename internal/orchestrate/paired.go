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

// DefaultProcessNoise is Config.ProcessNoise when it is 0: the standard
// deviation, as a fraction, of the difference in CPU per envelope between
// two processes of one binary measured side by side for their whole life,
// estimated from the A/A comparisons in docs/measurements.md.
const DefaultProcessNoise = 0.014

// pairedChange is the Change of metric from pairs of (baseline, build)
// values. Pairs with a value that is not positive are left out (a ratio
// needs both).
func pairedChange(metric string, base, build []float64) Change {
	return pairedChangeFrom(metric, base, build, 0, 0)
}

// pairedChangeStopped is pairedChange for a run that a precision rule may
// end once the interval is narrow enough: stopping on the plain interval
// calls an A/A run a change more often than 5%
// (TestPrecisionStopFalsePositives). Its interval takes Student's t with
// the first MinPairs pairs' degrees of freedom and the larger of their
// spread and all pairs' (a two-stage interval in the manner of Stein's).
func pairedChangeStopped(metric string, base, build []float64) Change {
	return pairedChangeFrom(metric, base, build, MinPairs, 0)
}

// pairedChangeFrom is pairedChange with, for n0 > 0, the two-stage
// interval over the first n0 pairs, and with process (a fraction) the
// spread of what the two builds' processes differ by for their whole
// life: pairs measured on one process per build cannot shrink it, so it
// is added to the interval's variance as it is.
func pairedChangeFrom(metric string, base, build []float64, n0 int, process float64) Change {
	c := Change{Metric: metric, Verdict: VerdictTooFewPairs}
	var logs []float64
	for i := range min(len(base), len(build)) {
		if base[i] > 0 && build[i] > 0 && !math.IsInf(base[i], 0) && !math.IsInf(build[i], 0) {
			logs = append(logs, math.Log(build[i]/base[i]))
		}
	}
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
	h := t * math.Sqrt(sd*sd/float64(c.Pairs)+process*process)
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
