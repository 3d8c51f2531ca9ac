package orchestrate

import (
	"fmt"
	"strings"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/configerr"
)

// sliceMetrics name, for each metric a Threshold can name, the metric of a
// comparison in slices it reads.
var sliceMetrics = map[string]string{
	"cpu_ms_per_envelope": "ms_per_envelope", "cores": "cores", "p99": "p99_ms",
	"peak_rss": "peak_rss", "forwarded_rate": "forwarded_per_s",
	"instructions_per_envelope": "instructions_per_envelope",
}

// IntervalGate holds each threshold against the paired change of every
// comparison in slices (compare.Check): crossed only when the change's
// whole interval is beyond it, passed only when the whole interval is
// within it, inconclusive otherwise. With m thresholds each is judged on a
// 1 − 5%/m interval (compare.GateLevel). It passes nothing it did not
// measure: a comparison that failed is a failure of the gate; a metric
// with too few pairs, no data (no instruction counters, say) or no
// interval is inconclusive with the reason; so is a gate with no
// comparison to hold. A threshold on a metric the comparison does not
// pair is an error of FailOn.
func IntervalGate(rep *Report, ths []Threshold) (GateResult, error) {
	var g GateResult
	for _, th := range ths {
		if _, ok := sliceMetrics[th.Metric]; !ok {
			return g, configerr.Errorf("FailOn", "%q: a comparison in slices pairs cpu_ms_per_envelope, cores, p99, peak_rss, forwarded_rate and (with a PMU) instructions_per_envelope", th.Spec)
		}
	}
	if len(rep.SliceRuns) == 0 {
		for _, th := range ths {
			g.Inconclusive = append(g.Inconclusive, Breach{Threshold: th, Why: "no comparison ran"})
		}
		return g, nil
	}
	level := compare.GateLevel(len(ths))
	for _, r := range rep.SliceRuns {
		if strings.HasPrefix(r.Ended, "failed") {
			g.Failed = append(g.Failed, fmt.Sprintf("%s against %s at %s: %s", r.Build, r.Baseline, rateLabel(r.Rate), r.Ended))
			continue
		}
		for _, th := range ths {
			b := Breach{Threshold: th, Build: r.Build, Rate: r.Rate}
			c, ok := changeOf(r, sliceMetrics[th.Metric])
			if !ok {
				b.Why = "not measured"
				if th.Metric == "instructions_per_envelope" {
					b.Why = "not measured: " + r.Counters
				}
				g.Inconclusive = append(g.Inconclusive, b)
				continue
			}
			g.Compared++
			v := compare.Check(c, th.Op, th.Pct, level)
			b.Change, b.Low, b.High, b.Why, b.Level = c.Pct, v.Low, v.High, v.Why, level
			switch v.Outcome {
			case compare.Crossed:
				g.Breaches = append(g.Breaches, b)
			case compare.Inconclusive:
				g.Inconclusive = append(g.Inconclusive, b)
			default:
				g.Passed = append(g.Passed, b)
			}
		}
	}
	return g, nil
}

// changeOf is the run's change of metric, if it measured one.
func changeOf(r *SliceRun, metric string) (compare.Change, bool) {
	for _, c := range r.Changes {
		if c.Metric == metric {
			return c, true
		}
	}
	return compare.Change{}, false
}
