package orchestrate

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// findMax bisects between the two rates for the highest one b keeps up with.
func (r *runner) findMax(ctx context.Context, b Build, run func(Build, int, float64, bool) *Step) FindMax {
	lo, hi := math.Min(r.cfg.Rates[0], r.cfg.Rates[1]), math.Max(r.cfg.Rates[0], r.cfg.Rates[1])
	fm := FindMax{Build: b.Name}
	// probe runs one step; broken means the search cannot go on: the step
	// failed, was interrupted, or was harness-limited (the load asked for
	// was not delivered, so Relay was not judged).
	probe := func(rate float64) (ok, broken bool) {
		fm.Probes = append(fm.Probes, rate)
		st := run(b, 1, rate, true)
		switch {
		case ctx.Err() != nil:
			fm.Stopped = "interrupted"
		case st.Failed:
			fm.Stopped = fmt.Sprintf("the step at %g/s failed: %s", rate, st.Error)
		case st.Verdict == VerdictHarnessLimited:
			fm.Stopped = fmt.Sprintf("the step at %g/s was harness-limited (%s)", rate, strings.Join(st.Reasons, "; "))
		default:
			return st.Verdict == VerdictKeptUp, false
		}
		return false, true
	}
	ok, broken := probe(lo)
	if broken || !ok {
		if !broken {
			fm.FellBehind = lo
		}
		return fm
	}
	fm.KeptUp = lo
	ok, broken = probe(hi)
	if broken {
		return fm
	}
	if ok {
		fm.KeptUp = hi
		return fm
	}
	fm.FellBehind = hi
	for len(fm.Probes) < r.cfg.FindMaxProbes && fm.FellBehind/fm.KeptUp > 1.05 && ctx.Err() == nil {
		mid := roundRate(math.Sqrt(fm.KeptUp * fm.FellBehind)) // geometric: rates span decades
		if mid <= fm.KeptUp || mid >= fm.FellBehind {
			break
		}
		ok, broken := probe(mid)
		if broken {
			break
		}
		if ok {
			fm.KeptUp = mid
		} else {
			fm.FellBehind = mid
		}
	}
	return fm
}

// roundRate keeps two significant digits (three above 10 000).
func roundRate(x float64) float64 {
	if x <= 0 {
		return x
	}
	digits := 2.0
	if x >= 10000 {
		digits = 3
	}
	p := math.Pow(10, math.Floor(math.Log10(x))-digits+1)
	return math.Round(x/p) * p
}
