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

	"github.com/relayload/relayload/internal/configerr"
)

// Threshold fails a run when a metric changed against a baseline run by
// more than Pct percent in the direction Op ('>': grew by more than Pct,
// '<': shrank by more than −Pct), like k6's thresholds.
type Threshold struct {
	Metric string  `json:"metric"`
	Op     byte    `json:"op"`
	Pct    float64 `json:"pct"`
	Spec   string  `json:"spec"`
}

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

// ParseThresholds parses "METRIC>+PCT%,METRIC<-PCT%,…", e.g.
// "cpu_ms_per_envelope>+5%,p99>+20%,forwarded_rate<-5%". Errors are
// *ConfigError about FailOn.
func ParseThresholds(spec string) ([]Threshold, error) {
	var out []Threshold
	metrics := gateMetrics()
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		i := strings.IndexAny(part, "<>")
		if i <= 0 {
			return nil, configerr.Errorf("FailOn", "%q: want METRIC>+PCT%% or METRIC<-PCT%%, e.g. cpu_ms_per_envelope>+5%%", part)
		}
		th := Threshold{Metric: part[:i], Op: part[i], Spec: part}
		if _, ok := metrics[th.Metric]; !ok {
			return nil, configerr.Errorf("FailOn", "%q: unknown metric %q (want one of %s)", part, th.Metric,
				strings.Join(slices.Sorted(maps.Keys(metrics)), ", "))
		}
		num, ok := strings.CutSuffix(part[i+1:], "%")
		v, err := strconv.ParseFloat(num, 64)
		if !ok || err != nil || math.IsNaN(v) || math.IsInf(v, 0) || th.Op == '>' && v < 0 || th.Op == '<' && v > 0 {
			return nil, configerr.Errorf("FailOn", "%q: want a change in percent, +N%% after > or -N%% after <", part)
		}
		th.Pct = v
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

// GateResult is the comparison of a run with a baseline run.
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
}

// Gate compares every point of rep's first build with the baseline's
// point at the same rate (the baseline's first build, or the build of the
// same name) and lists the thresholds crossed.
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
