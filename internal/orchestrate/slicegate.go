package orchestrate

import "github.com/relayload/relayload/internal/configerr"

// sliceMetrics name, for each metric a Threshold can name, the metric of a
// comparison in slices it reads.
var sliceMetrics = map[string]string{
	"cpu_ms_per_envelope": "ms_per_envelope", "cores": "cores", "p99": "p99_ms",
	"peak_rss": "peak_rss", "forwarded_rate": "forwarded_per_s",
	"instructions_per_envelope": "instructions_per_envelope",
}

// IntervalGate holds each threshold against the paired change of every
// comparison in slices: a threshold is crossed only when the whole 95%
// interval of the change is beyond it, passed when the whole interval is
// within it, and inconclusive otherwise (the run's resolution is too coarse
// to say; more pairs, a larger Budget, can settle it). A threshold on a
// metric the comparison does not pair is an error of FailOn.
func IntervalGate(rep *Report, ths []Threshold) (GateResult, error) {
	var g GateResult
	for _, th := range ths {
		if _, ok := sliceMetrics[th.Metric]; !ok {
			return g, configerr.Errorf("FailOn", "%q: a comparison in slices pairs cpu_ms_per_envelope, cores, p99, peak_rss, forwarded_rate and (with a PMU) instructions_per_envelope", th.Spec)
		}
	}
	for _, r := range rep.SliceRuns {
		for _, th := range ths {
			for _, c := range r.Changes {
				if c.Metric != sliceMetrics[th.Metric] || c.Pairs < 2 {
					continue
				}
				g.Compared++
				b := Breach{Threshold: th, Build: r.Build, Rate: r.Rate, Change: c.Pct, Low: c.Low, High: c.High}
				beyond := th.Op == '>' && c.Low > th.Pct || th.Op == '<' && c.High < th.Pct
				within := th.Op == '>' && c.High <= th.Pct || th.Op == '<' && c.Low >= th.Pct
				switch {
				case beyond:
					g.Breaches = append(g.Breaches, b)
				case !within:
					g.Inconclusive = append(g.Inconclusive, b)
				}
			}
		}
	}
	return g, nil
}
