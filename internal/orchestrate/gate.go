package orchestrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/cli/upstreamflag"
	"github.com/relayload/relayload/internal/configerr"
)

// Threshold fails a run when a metric changed against a baseline run by
// more than Pct percent in the direction Op ('>': grew by more than Pct,
// '<': shrank by more than −Pct), like k6's thresholds; or, Abs, when the
// metric itself is beyond Value in the direction Op, with no baseline.
type Threshold struct {
	Metric string  `json:"metric"`
	Op     byte    `json:"op"`
	Pct    float64 `json:"pct"`
	Spec   string  `json:"spec"`
	// Abs: an absolute limit, Value in the unit the metric has in a Point
	// (milliseconds for latencies, bytes, envelopes per second), not a
	// change.
	Abs   bool    `json:"abs,omitempty"`
	Value float64 `json:"value,omitempty"`
}

// keptUp is the metric of a sweep, not of a rate, that an absolute
// Threshold can name: the highest rate a build kept up with.
const keptUp = "kept_up"

// gateMetrics are the metrics a Threshold can name, read from a Point.
func gateMetrics() map[string]func(*Point) float64 {
	return map[string]func(*Point) float64{
		"cpu_ms_per_envelope": func(p *Point) float64 { return p.MsPerEnv },
		"cores":               func(p *Point) float64 { return p.NetCores },
		"p50":                 func(p *Point) float64 { return p.Latency.P50 },
		"p90":                 func(p *Point) float64 { return p.Latency.P90 },
		"p99":                 func(p *Point) float64 { return p.Latency.P99 },
		"max":                 func(p *Point) float64 { return p.Latency.Max },
		"peak_rss":            func(p *Point) float64 { return p.PeakRSS },
		"accepted_rate":       func(p *Point) float64 { return p.AcceptedRate },
		"forwarded_rate":      func(p *Point) float64 { return p.ForwardedRate },
		// Only a comparison in slices counts instructions (IntervalGate).
		"instructions_per_envelope": func(*Point) float64 { return 0 },
	}
}

// limitUnit is how an absolute limit on a metric is written and shown.
type limitUnit struct {
	// form names the limit's form in errors, with an example.
	form string
	// parse reads a limit into the Point's unit; ok false if it is not one.
	parse func(s string) (float64, bool)
	// show formats a value in the Point's unit.
	show func(v float64) string
}

// limitUnits are the units of the metrics an absolute Threshold can name
// (instructions_per_envelope has none: only a comparison in slices counts
// them, as a change).
func limitUnits() map[string]limitUnit {
	duration := limitUnit{"a duration such as 250ms or 1s", func(s string) (float64, bool) {
		d, err := time.ParseDuration(s)
		return float64(d) / float64(time.Millisecond), err == nil && d > 0
	}, func(ms float64) string {
		switch {
		case ms >= 1000:
			return sig(ms/1000) + "s"
		case ms >= 1:
			return sig(ms) + "ms"
		}
		return sig(ms*1000) + "µs"
	}}
	number := func(form, suffix string) limitUnit {
		return limitUnit{form, func(s string) (float64, bool) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(s, suffix), 64)
			return v, err == nil && v > 0 && !math.IsInf(v, 0)
		}, func(v float64) string { return sig(v) + suffix }}
	}
	rate := number("envelopes per second such as 500 or 500/s", "/s")
	return map[string]limitUnit{
		"p50": duration, "p90": duration, "p99": duration, "max": duration,
		"cpu_ms_per_envelope": number("milliseconds of CPU per envelope such as 5 or 5ms", "ms"),
		"cores":               number("cores such as 1.5", ""),
		"peak_rss": {"a size in bytes, or with KiB, MiB or GiB, such as 800MiB", func(s string) (float64, bool) {
			n, err := upstreamflag.ParseSize(s)
			return float64(n), err == nil
		}, func(v float64) string { return mib(uint64(v)) }},
		"accepted_rate": rate, "forwarded_rate": rate, keptUp: rate,
	}
}

// sig formats v with three significant digits at most, no exponent and
// no trailing zeros: 1.3, 250, 0.0123.
func sig(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	digits := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// thresholdForms is what a threshold may look like, for errors.
const thresholdForms = "want METRIC>+PCT% or METRIC<-PCT% (a change against a baseline), or METRIC>LIMIT or METRIC<LIMIT (an absolute limit), e.g. cpu_ms_per_envelope>+5%, p99>1s, kept_up<500"

// ParseThresholds parses a comma-separated list of changes,
// "METRIC>+PCT%" or "METRIC<-PCT%" (e.g. "cpu_ms_per_envelope>+5%"), and
// absolute limits, "METRIC>LIMIT" or "METRIC<LIMIT" in the metric's unit
// (e.g. "p99>1s", "peak_rss>800MiB", "forwarded_rate<400"), among them
// "kept_up<RATE": the highest rate kept up with must be at least RATE.
// Errors are *ConfigError about FailOn.
func ParseThresholds(spec string) ([]Threshold, error) {
	var out []Threshold
	metrics, units := gateMetrics(), limitUnits()
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		i := strings.IndexAny(part, "<>")
		if i <= 0 {
			return nil, configerr.Errorf("FailOn", "%q: %s", part, thresholdForms)
		}
		th := Threshold{Metric: strings.TrimSpace(part[:i]), Op: part[i], Spec: part}
		_, known := metrics[th.Metric]
		if !known && th.Metric != keptUp {
			return nil, configerr.Errorf("FailOn", "%q: unknown metric %q (want one of %s)", part, th.Metric,
				strings.Join(slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(metrics)), keptUp))), ", "))
		}
		limit := strings.TrimSpace(part[i+1:])
		num, pct := strings.CutSuffix(limit, "%")
		if pct {
			v, err := strconv.ParseFloat(num, 64)
			switch {
			case th.Metric == keptUp:
				return nil, configerr.Errorf("FailOn", "%q: kept_up takes a rate, not a change: kept_up<RATE fails when the highest rate kept up with is below RATE", part)
			case err != nil || math.IsNaN(v) || math.IsInf(v, 0) || th.Op == '>' && v < 0 || th.Op == '<' && v > 0:
				return nil, configerr.Errorf("FailOn", "%q: want a change in percent, +N%% after > or -N%% after <", part)
			}
			th.Pct = v
			out = append(out, th)
			continue
		}
		u, ok := units[th.Metric]
		switch {
		case !ok:
			return nil, configerr.Errorf("FailOn", "%q: %s takes a change only (%s>+5%%): only a comparison in slices counts it", part, th.Metric, th.Metric)
		case th.Metric == keptUp && th.Op != '<':
			return nil, configerr.Errorf("FailOn", "%q: kept_up takes < only: kept_up<RATE fails when the highest rate kept up with is below RATE", part)
		}
		th.Abs = true
		if th.Value, ok = u.parse(limit); !ok {
			if th.Metric == keptUp {
				return nil, configerr.Errorf("FailOn", "%q: kept_up<RATE wants %s", part, u.form)
			}
			return nil, configerr.Errorf("FailOn", "%q: %s takes a change (%s%c%s5%%) or a limit: %s", part, th.Metric, th.Metric, th.Op,
				map[byte]string{'>': "+", '<': "-"}[th.Op], u.form)
		}
		out = append(out, th)
	}
	return out, nil
}

// Breach is a threshold crossed at one rate.
type Breach struct {
	Threshold Threshold `json:"threshold"`
	Build     string    `json:"build"`
	Rate      float64   `json:"target_rate"`
	Baseline  float64   `json:"baseline"`
	Value     float64   `json:"value"`
	Change    float64   `json:"change_pct"`
	// Low and High bound the interval the change was judged on, at Level
	// (IntervalGate); Why says why there was none to judge on.
	Low   float64 `json:"low_pct,omitempty"`
	High  float64 `json:"high_pct,omitempty"`
	Level float64 `json:"level,omitempty"`
	Why   string  `json:"why,omitempty"`
}

func (b Breach) String() string {
	if th := b.Threshold; th.Abs {
		show := limitUnits()[th.Metric].show
		if th.Metric == keptUp {
			what := "the highest rate it kept up with"
			if b.Value == 0 {
				what = "it kept up with no rate tried"
			}
			return fmt.Sprintf("kept_up of %s: %s < %s (%s)", b.Build, show(b.Value), show(th.Value), what)
		}
		return fmt.Sprintf("%s of %s at %s: %s %c %s", th.Metric, b.Build, rateLabel(b.Rate), show(b.Value), th.Op, show(th.Value))
	}
	switch {
	case b.Why != "" && b.Build == "":
		return fmt.Sprintf("%s: %s", b.Threshold.Spec, b.Why)
	case b.Why != "":
		return fmt.Sprintf("%s at %s: %s, threshold %s", b.Build, rateLabel(b.Rate), b.Why, b.Threshold.Spec)
	case b.Level != 0:
		return fmt.Sprintf("%s at %s: %+.1f%% (%g%% interval %+.1f%% to %+.1f%%), threshold %s", b.Build, rateLabel(b.Rate), b.Change, 100*b.Level, b.Low, b.High, b.Threshold.Spec)
	}
	return fmt.Sprintf("%s at %s: %.4g → %.4g (%+.1f%%), threshold %s", b.Build, rateLabel(b.Rate), b.Baseline, b.Value, b.Change, b.Threshold.Spec)
}

// GateResult is a run held against its thresholds: changes against a
// baseline run (Gate) or between the builds of a comparison in slices
// (IntervalGate), and absolute limits (AbsoluteGate).
type GateResult struct {
	Baseline string   `json:"baseline"`
	Breaches []Breach `json:"breaches"`
	// Compared counts the (rate, threshold) pairs checked; Missing the
	// rates of this run the baseline has no kept-up or fell-behind point for.
	Compared int       `json:"compared"`
	Missing  []float64 `json:"missing,omitempty"`
	// Inconclusive are the thresholds whose change's interval straddles
	// them (IntervalGate): neither crossed nor passed at this resolution;
	// or that had nothing measured to hold (Breach.Why says why).
	Inconclusive []Breach `json:"inconclusive,omitempty"`
	// Passed are the thresholds a comparison's interval was all within
	// (IntervalGate), with the interval: the resolution the gate reached.
	Passed []Breach `json:"passed,omitempty"`
	// Failed are the comparisons that failed: their thresholds are
	// neither crossed nor passed, and the gate fails.
	Failed []string `json:"failed,omitempty"`
	// Unmeasured say which absolute limits had no figure to hold at a
	// rate, and why (AbsoluteGate): neither passed nor crossed.
	Unmeasured []string `json:"unmeasured,omitempty"`
}

// Join is g with o's checks added: the changes of Gate or IntervalGate
// and the limits of AbsoluteGate in one result.
func (g GateResult) Join(o GateResult) GateResult {
	if g.Baseline == "" {
		g.Baseline = o.Baseline
	}
	g.Breaches = slices.Concat(g.Breaches, o.Breaches)
	g.Compared += o.Compared
	g.Missing = slices.Concat(g.Missing, o.Missing)
	g.Inconclusive = slices.Concat(g.Inconclusive, o.Inconclusive)
	g.Passed = slices.Concat(g.Passed, o.Passed)
	g.Failed = slices.Concat(g.Failed, o.Failed)
	g.Unmeasured = slices.Concat(g.Unmeasured, o.Unmeasured)
	return g
}

// AbsoluteBreaches are the absolute limits crossed, among g.Breaches.
func (g *GateResult) AbsoluteBreaches() []Breach {
	var out []Breach
	for _, b := range g.Breaches {
		if b.Threshold.Abs {
			out = append(out, b)
		}
	}
	return out
}

// AbsoluteGate holds each absolute threshold of ths (the changes are
// Gate's and IntervalGate's) against every build's point at every rate
// (rep.Summary), and kept_up against each build's highest rate kept up
// with (rep.KeptUpWith; 0 when none). A figure is held only where a step
// was judged (kept up or fell behind): a rate where every step failed or
// none was judged (harness-limited), or where the metric is 0 (nothing
// measured), is no pass, and neither is a rate where some step failed;
// kept_up below the limit with a rate from the limit up not judged is
// not crossed. Each is listed in Unmeasured.
func AbsoluteGate(rep *Report, ths []Threshold) GateResult {
	var g GateResult
	metrics := gateMetrics()
	for _, th := range ths {
		if !th.Abs {
			continue
		}
		if th.Metric == keptUp {
			g.holdKeptUp(rep, th)
			continue
		}
		before := g.Compared + len(g.Unmeasured)
		for _, p := range rep.Summary {
			at := fmt.Sprintf("%s of %s at %s", th.Metric, p.Build, rateLabel(p.Rate))
			switch {
			case p.Failed > 0 && p.Failed == p.Runs:
				g.Unmeasured = append(g.Unmeasured, at+": every step failed")
				continue
			case !judged(p):
				g.Unmeasured = append(g.Unmeasured, fmt.Sprintf("%s: no step judged (%s)", at, p.Verdict))
				continue
			case p.Failed > 0:
				g.Unmeasured = append(g.Unmeasured, fmt.Sprintf("%s: %d of %d steps failed", at, p.Failed, p.Runs))
			}
			v := metrics[th.Metric](p)
			if v == 0 {
				g.Unmeasured = append(g.Unmeasured, at+": nothing measured")
				continue
			}
			g.Compared++
			if th.Op == '>' && v > th.Value || th.Op == '<' && v < th.Value {
				g.Breaches = append(g.Breaches, Breach{Threshold: th, Build: p.Build, Rate: p.Rate, Value: v})
			}
		}
		if g.Compared+len(g.Unmeasured) == before {
			g.Unmeasured = append(g.Unmeasured, th.Spec+": no rate measured")
		}
	}
	return g
}

// judged reports whether some step of p kept up or fell behind (its
// verdict, or one of a mixed verdict's).
func judged(p *Point) bool {
	return strings.Contains(p.Verdict, VerdictKeptUp) || strings.Contains(p.Verdict, VerdictFellBehind)
}

// holdKeptUp holds kept_up<RATE against each build's highest rate kept up
// with; a build with no rate judged (but max, which has no rate), or
// below RATE with a rate from RATE up not judged, is unmeasured.
func (g *GateResult) holdKeptUp(rep *Report, th Threshold) {
	var builds []string
	for _, b := range rep.Setup.Builds {
		builds = append(builds, b.Name)
	}
	for _, p := range rep.Summary {
		if !slices.Contains(builds, p.Build) {
			builds = append(builds, p.Build)
		}
	}
	if len(builds) == 0 {
		g.Unmeasured = append(g.Unmeasured, th.Spec+": no build ran")
	}
	for _, b := range builds {
		if !slices.ContainsFunc(rep.Summary, func(p *Point) bool { return p.Build == b && p.Rate != RateMax && judged(p) }) {
			g.Unmeasured = append(g.Unmeasured, fmt.Sprintf("kept_up of %s: no rate judged (every step failed, was harness-limited or ran at max rate)", b))
			continue
		}
		v := rep.KeptUpWith[b]
		if v < th.Value {
			// A rate at or above the limit that was not judged might have
			// kept up: not a pass, nor crossed.
			i := slices.IndexFunc(rep.Summary, func(p *Point) bool {
				return p.Build == b && p.Rate != RateMax && p.Rate >= th.Value && !judged(p)
			})
			if i >= 0 {
				p := rep.Summary[i]
				g.Unmeasured = append(g.Unmeasured, fmt.Sprintf("kept_up of %s: %s not judged (%s), and no rate from %s kept up",
					b, rateLabel(p.Rate), p.Verdict, rateLabel(th.Value)))
				continue
			}
			g.Breaches = append(g.Breaches, Breach{Threshold: th, Build: b, Value: v})
		}
		g.Compared++
	}
}

// NeverKeptUp lists the builds of Relay that kept up with no rate tried:
// some step of theirs was judged, and every judged step fell behind
// (failed, harness-limited and interrupted steps are not judged). A
// bisection or a sweep past the capacity falls behind at some rates; only
// a build that kept up at none is listed. A sweep of the harness (no
// Relay) lists none: its falling behind is the harness's capacity, what
// it measures, and a busy machine's too.
func NeverKeptUp(rep *Report) []string {
	if rep.Harness {
		return nil
	}
	kept, fell := map[string]bool{}, map[string]bool{}
	var order []string
	for _, st := range rep.Steps {
		switch st.Verdict {
		case VerdictKeptUp:
			kept[st.Build] = true
		case VerdictFellBehind:
			if !fell[st.Build] {
				order = append(order, st.Build)
			}
			fell[st.Build] = true
		}
	}
	var out []string
	for _, b := range order {
		if !kept[b] {
			out = append(out, b)
		}
	}
	return out
}

// Gate compares every point of rep's first build with the baseline's
// point at the same rate (the baseline's first build, or the build of the
// same name) and lists the thresholds crossed (changes; absolute limits
// are AbsoluteGate's).
func Gate(rep, base *Report, path string, ths []Threshold) GateResult {
	g := GateResult{Baseline: path}
	if len(rep.Setup.Builds) == 0 || len(base.Setup.Builds) == 0 {
		return g
	}
	build := rep.Setup.Builds[0].Name
	baseBuild := base.Setup.Builds[0].Name
	for _, b := range base.Setup.Builds {
		if b.Name == build {
			baseBuild = build
		}
	}
	metrics := gateMetrics()
	for _, p := range rep.Summary {
		if p.Build != build || p.Verdict == VerdictFailed {
			continue
		}
		var bp *Point
		for _, q := range base.Summary {
			if q.Build == baseBuild && q.Rate == p.Rate && q.Verdict != VerdictFailed {
				bp = q
			}
		}
		if bp == nil {
			g.Missing = append(g.Missing, p.Rate)
			continue
		}
		for _, th := range ths {
			if th.Abs {
				continue // AbsoluteGate's
			}
			was, now := metrics[th.Metric](bp), metrics[th.Metric](p)
			if was == 0 {
				continue // no percentage of nothing
			}
			g.Compared++
			if c := change(was, now); th.Op == '>' && c > th.Pct || th.Op == '<' && c < th.Pct {
				g.Breaches = append(g.Breaches, Breach{Threshold: th, Build: build, Rate: p.Rate, Baseline: was, Value: now, Change: c})
			}
		}
	}
	return g
}

// ReadReport reads a results.json written by an earlier run.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, configerr.Wrap("Baseline", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, configerr.Wrap("Baseline", fmt.Errorf("%s: not a results.json: %w", path, err))
	}
	if len(rep.Summary) == 0 {
		return nil, configerr.Errorf("Baseline", "%s has no per-rate results", path)
	}
	return &rep, nil
}
