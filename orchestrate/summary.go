package orchestrate

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// summarize fills Summary, Comparisons and KeptUpWith from the steps.
func summarize(rep *Report, cfg Config) {
	type key struct {
		build string
		rate  float64
	}
	groups := map[key][]*Step{}
	var keys []key
	for _, st := range rep.Steps {
		if st.Verdict == VerdictInterrupted {
			continue
		}
		k := key{st.Build, st.Rate}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], st)
	}
	buildIndex := map[string]int{}
	for i, b := range cfg.Builds {
		buildIndex[b.Name] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].build != keys[j].build {
			return buildIndex[keys[i].build] < buildIndex[keys[j].build]
		}
		return rateOrder(keys[i].rate) < rateOrder(keys[j].rate)
	})
	byKey := map[key]*Point{}
	for _, k := range keys {
		p := &Point{Build: k.build, Rate: k.rate}
		var ok []*Step
		for _, st := range groups[k] {
			p.Runs++
			if st.Failed {
				p.Failed++
				p.Reasons = append(p.Reasons, "failed: "+st.Error)
				continue
			}
			ok = append(ok, st)
			if st.Verdict == VerdictKeptUp {
				p.KeptUp++
			} else {
				for _, r := range st.Reasons {
					if !slices.Contains(p.Reasons, r) {
						p.Reasons = append(p.Reasons, r)
					}
				}
			}
		}
		med := func(f func(*Step) float64) float64 {
			v := make([]float64, len(ok))
			for i, st := range ok {
				v[i] = f(st)
			}
			return Median(v)
		}
		spread := func(f func(*Step) float64) float64 {
			v := make([]float64, len(ok))
			for i, st := range ok {
				v[i] = f(st)
			}
			return Spread(v)
		}
		if len(ok) > 0 {
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
			p.CoresSpread = spread(func(s *Step) float64 { return s.CPU.NetCores })
			p.MsPerEnvSpread = spread(func(s *Step) float64 { return s.CPU.MsPerEnv })
		}
		p.Verdict = pointVerdict(groups[k])
		p.KeptUpJudged = p.KeptUp > 0
		for _, st := range groups[k] {
			if st.Verdict != VerdictKeptUp && st.Verdict != VerdictHarnessLimited {
				p.KeptUpJudged = false
			}
		}
		rep.Summary = append(rep.Summary, p)
		byKey[k] = p
		if p.KeptUpJudged && p.Rate != RateMax && p.Rate > rep.KeptUpWith[k.build] {
			rep.KeptUpWith[k.build] = p.Rate
		}
	}
	for _, fm := range rep.FindMax {
		rep.KeptUpWith[fm.Build] = fm.KeptUp
	}
	if len(cfg.Builds) > 1 {
		base := cfg.Builds[0].Name
		for _, k := range keys {
			if k.build == base {
				continue
			}
			bp, p := byKey[key{base, k.rate}], byKey[k]
			if bp == nil || p == nil || bp.Verdict == VerdictFailed || p.Verdict == VerdictFailed {
				continue
			}
			rep.Comparisons = append(rep.Comparisons, Comparison{
				Build: k.build, Baseline: base, Rate: k.rate,
				BaseCores: bp.NetCores, Cores: p.NetCores, CoresChange: change(bp.NetCores, p.NetCores),
				BaseMsPerEnv: bp.MsPerEnv, MsPerEnv: p.MsPerEnv, MsPerEnvChange: change(bp.MsPerEnv, p.MsPerEnv),
				P99Change: change(bp.Latency.P99, p.Latency.P99), PeakRSSChange: change(bp.PeakRSS, p.PeakRSS),
			})
		}
	}
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
	for _, v := range []string{VerdictKeptUp, VerdictFellBehind, VerdictHarnessLimited, VerdictFailed} {
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
