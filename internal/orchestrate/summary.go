package orchestrate

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/compare"
)

// pointKey is one build at one rate.
type pointKey struct {
	build string
	rate  float64
}

// summarize fills Summary, Comparisons and KeptUpWith from the steps.
func summarize(rep *Report, cfg Config) {
	groups, keys := groupSteps(rep.Steps, cfg.Builds)
	byKey := map[pointKey]*Point{}
	for _, k := range keys {
		p := newPoint(k, groups[k])
		rep.Summary = append(rep.Summary, p)
		byKey[k] = p
		if p.KeptUpJudged && p.Rate != RateMax && p.Rate > rep.KeptUpWith[k.build] {
			rep.KeptUpWith[k.build] = p.Rate
		}
	}
	for _, fm := range rep.FindMax {
		rep.KeptUpWith[fm.Build] = fm.KeptUp
	}
	if len(cfg.Builds) < 2 {
		return
	}
	base := cfg.Builds[0].Name
	for _, k := range keys {
		if k.build == base {
			continue
		}
		bp, p := byKey[pointKey{base, k.rate}], byKey[k]
		if bp == nil || p == nil || bp.Verdict == VerdictFailed || p.Verdict == VerdictFailed {
			continue
		}
		c := Comparison{
			Build: k.build, Baseline: base, Rate: k.rate,
			BaseCores: bp.NetCores, Cores: p.NetCores, CoresChange: change(bp.NetCores, p.NetCores),
			BaseMsPerEnv: bp.MsPerEnv, MsPerEnv: p.MsPerEnv, MsPerEnvChange: change(bp.MsPerEnv, p.MsPerEnv),
			P99Change: change(bp.Latency.P99, p.Latency.P99), PeakRSSChange: change(bp.PeakRSS, p.PeakRSS),
		}
		c.MsPerEnvPaired = roundsPaired("ms_per_envelope", groups[pointKey{base, k.rate}], groups[k], msPerEnv)
		c.CoresPaired = roundsPaired("cores", groups[pointKey{base, k.rate}], groups[k], netCores)
		if c.MsPerEnvPaired != nil && c.CoresPaired != nil {
			// CPU per envelope is the primary metric; cores is judged after it.
			cs := []compare.Change{*c.MsPerEnvPaired, *c.CoresPaired}
			compare.Judge(cs)
			*c.MsPerEnvPaired, *c.CoresPaired = cs[0], cs[1]
		}
		rep.Comparisons = append(rep.Comparisons, c)
	}
}

func msPerEnv(s *Step) float64 { return s.CPU.MsPerEnv }
func netCores(s *Step) float64 { return s.CPU.NetCores }

// roundsPaired is the paired change of f from the baseline's steps to the
// build's, each round a pair (both builds ran in it, back to back) on
// processes of its own, so the pairs' spread holds the processes'; nil
// with fewer than two rounds in which both steps succeeded.
func roundsPaired(metric string, baseSteps, steps []*Step, f func(*Step) float64) *compare.Change {
	byRound := map[int]*Step{}
	for _, st := range baseSteps {
		if !st.Failed {
			byRound[st.Round] = st
		}
	}
	var a, b []float64
	for _, st := range steps {
		if bs := byRound[st.Round]; bs != nil && !st.Failed {
			a, b = append(a, f(bs)), append(b, f(st))
		}
	}
	if len(a) < 2 {
		return nil
	}
	blocks := make([]int, len(a))
	for i := range blocks {
		blocks[i] = i
	}
	c := compare.Estimate(metric, compare.Pairs{Base: a, Build: b, Blocks: blocks}, compare.Options{Prior: compare.Prior{DF: math.Inf(1)}})
	return &c
}

// groupSteps groups the judged steps by build and rate, the keys in the
// builds' order and by rate (RateMax last).
func groupSteps(steps []*Step, builds []Build) (map[pointKey][]*Step, []pointKey) {
	groups := map[pointKey][]*Step{}
	var keys []pointKey
	for _, st := range steps {
		if st.Verdict == VerdictInterrupted && !st.Partial {
			continue // nothing measured
		}
		k := pointKey{st.Build, st.Rate}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], st)
	}
	buildIndex := map[string]int{}
	for i, b := range builds {
		buildIndex[b.Name] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].build != keys[j].build {
			return buildIndex[keys[i].build] < buildIndex[keys[j].build]
		}
		return rateOrder(keys[i].rate) < rateOrder(keys[j].rate)
	})
	return groups, keys
}

// newPoint summarises the rounds of one build at one rate: medians and
// spreads over the steps that did not fail, the reasons of those that did
// not keep up, and the common verdict.
func newPoint(k pointKey, steps []*Step) *Point {
	p := &Point{Build: k.build, Rate: k.rate}
	var ok, partial []*Step
	for _, st := range steps {
		p.Runs++
		if st.Failed {
			p.Failed++
			p.Reasons = append(p.Reasons, "failed: "+st.Error)
			continue
		}
		if st.Partial {
			partial = append(partial, st)
			continue
		}
		ok = append(ok, st)
		if st.Verdict == VerdictKeptUp {
			p.KeptUp++
			continue
		}
		for _, r := range st.Reasons {
			if !slices.Contains(p.Reasons, r) {
				p.Reasons = append(p.Reasons, r)
			}
		}
	}
	switch {
	case len(ok) > 0:
		p.fill(ok)
	case len(partial) > 0: // what an interrupted step measured, as a last resort
		p.fill(partial)
		p.Partial = true
	default:
		p.fillFailedLoad(steps)
	}
	p.Verdict = pointVerdict(steps)
	p.KeptUpJudged = p.KeptUp > 0
	for _, st := range steps {
		// Harness-limited and interrupted rounds are not judged.
		if st.Verdict != VerdictKeptUp && st.Verdict != VerdictHarnessLimited && st.Verdict != VerdictInterrupted {
			p.KeptUpJudged = false
		}
	}
	return p
}

// fill sets the point's figures to the medians over steps.
func (p *Point) fill(steps []*Step) {
	values := func(f func(*Step) float64) []float64 {
		v := make([]float64, len(steps))
		for i, st := range steps {
			v[i] = f(st)
		}
		return v
	}
	med := func(f func(*Step) float64) float64 { return Median(values(f)) }
	p.AchievedRate = med(func(s *Step) float64 { return s.AchievedRate })
	p.AcceptedRate = med(func(s *Step) float64 { return s.AcceptedRate })
	p.ForwardedRate = med(func(s *Step) float64 { return s.Steady.ForwardedRate })
	p.BacklogEnd = med(func(s *Step) float64 { return float64(s.Steady.BacklogEnd) })
	p.CatchUp = time.Duration(med(func(s *Step) float64 { return float64(s.Steady.CatchUp) }))
	p.RSSSlope = med(func(s *Step) float64 { return s.Steady.RSSSlope })
	p.Latency = Quantiles{
		P50: med(func(s *Step) float64 { return s.Latency.P50 }),
		P90: med(func(s *Step) float64 { return s.Latency.P90 }),
		P99: med(func(s *Step) float64 { return s.Latency.P99 }),
		Max: med(func(s *Step) float64 { return s.Latency.Max }),
	}
	p.NetCores = med(func(s *Step) float64 { return s.CPU.NetCores })
	p.IdleCores = med(func(s *Step) float64 { return s.CPU.IdleCores })
	p.MsPerEnv = med(func(s *Step) float64 { return s.CPU.MsPerEnv })
	p.PeakRSS = med(func(s *Step) float64 { return float64(s.Memory.PeakRSS) })
	p.Shutdown = med(func(s *Step) float64 { return s.Shutdown.Took.Seconds() })
	p.Gap = med(func(s *Step) float64 { return float64(s.Upstream.Gap) })
	p.CoresSpread = Spread(values(func(s *Step) float64 { return s.CPU.NetCores }))
	p.MsPerEnvSpread = Spread(values(func(s *Step) float64 { return s.CPU.MsPerEnv }))
}

// fillFailedLoad sets the rates blast sent and had accepted, medians over
// the failed steps that sent anything before they failed, so that the
// point says what its steps say (Relay killed mid-window: blast sent
// until then); the other figures, which a failed step does not have,
// stay 0.
func (p *Point) fillFailedLoad(steps []*Step) {
	var sent, accepted []float64
	for _, st := range steps {
		if st.Failed && st.Sent > 0 {
			sent = append(sent, st.AchievedRate)
			accepted = append(accepted, st.AcceptedRate)
		}
	}
	p.AchievedRate, p.AcceptedRate = Median(sent), Median(accepted)
}

// rateOrder sorts RateMax after every rate.
func rateOrder(r float64) float64 {
	if r == RateMax {
		return math.Inf(1)
	}
	return r
}

// pointVerdict is the verdict over the rounds of one build at one rate: the
// common verdict when all agree, else how many rounds had each, e.g.
// "mixed: 2 kept up, 1 fell behind".
func pointVerdict(steps []*Step) string {
	count := map[string]int{}
	for _, s := range steps {
		count[s.Verdict]++
	}
	if len(count) == 1 {
		return steps[0].Verdict
	}
	var parts []string
	for _, v := range []string{VerdictKeptUp, VerdictFellBehind, VerdictHarnessLimited, VerdictFailed, VerdictInterrupted} {
		if n := count[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	return "mixed: " + strings.Join(parts, ", ")
}

// change is (b−a)/a in percent (0 when a is 0).
func change(a, b float64) float64 {
	if a == 0 {
		return 0
	}
	return 100 * (b - a) / a
}

// Median of v (0 for none); v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Spread is (max−min)/|median| in percent (0 for fewer than two values).
func Spread(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := Median(v)
	if m == 0 {
		return 0
	}
	return 100 * (slices.Max(v) - slices.Min(v)) / math.Abs(m)
}
