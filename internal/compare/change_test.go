package compare

import (
	"math"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// known is a prior of no spread known exactly: the plain paired t interval.
var known = Options{Prior: Prior{DF: math.Inf(1)}}

// TestEstimateHandComputed checks the interval against cases worked out by
// hand.
func TestEstimateHandComputed(t *testing.T) {
	// Ratios 1.1, 1.1, 1.1: no spread, a 10% change with a zero-width interval.
	c := Estimate("x", Pairs{Base: []float64{1, 2, 3}, Build: []float64{1.1, 2.2, 3.3}}, known)
	if c.Pairs != 3 || !near(c.Pct, 10, 1e-9) || !near(c.HalfWidth, 0, 1e-9) || c.Verdict != VerdictHigher || c.P > 1e-9 {
		t.Errorf("constant ratio: %+v", c)
	}
	c = Estimate("x", Pairs{Base: []float64{1, 1}, Build: []float64{1, 1}}, known)
	if c.Verdict != "no change beyond ±0.0%" || c.P != 1 {
		t.Errorf("identical: %+v", c)
	}
	// Log ratios ±d: mean 0, sd d·√2, se d, t(0.975, 1) = 12.706.
	d := 0.01
	c = Estimate("x", Pairs{Base: []float64{1, 1}, Build: []float64{math.Exp(d), math.Exp(-d)}}, known)
	wantH := 12.706204736 * d
	if !near(c.High, 100*math.Expm1(wantH), 1e-3) || !near(c.Low, 100*math.Expm1(-wantH), 1e-3) || c.DF != 1 || !strings.HasPrefix(c.Verdict, "no change beyond ±") {
		t.Errorf("±1%%: %+v, want high %.4f", c, 100*math.Expm1(wantH))
	}
	// A 5% drop in every pair with 1% noise: lower.
	base := []float64{10, 10, 10, 10, 10, 10}
	build := []float64{9.4, 9.5, 9.6, 9.45, 9.55, 9.5}
	if c := Estimate("x", Pairs{Base: base, Build: build}, known); c.Verdict != VerdictLower || c.High >= 0 || c.P > 1e-3 {
		t.Errorf("5%% drop: %+v", c)
	}
	// A spread known exactly adds to the variance: a constant 1% ratio
	// over 100 pairs on one pair of processes is within ±1.96·1.4% once
	// they may differ by 1.4% (the pairs' own spread is 0: the normal
	// quantile on infinite df).
	b100, c100 := make([]float64, 100), make([]float64, 100)
	for i := range b100 {
		b100[i], c100[i] = 1, 1.01
	}
	exact := Options{Prior: Prior{Spread: 0.014, DF: math.Inf(1)}}
	c = Estimate("x", Pairs{Base: b100, Build: c100}, exact)
	wantH = 1.959963985 * 0.014
	if !strings.HasPrefix(c.Verdict, "no change beyond ±") || !near(c.High, 100*(1.01*math.Exp(wantH)-1), 1e-3) || !near(c.Spread, 1.4, 1e-9) {
		t.Errorf("known spread: %+v, want high %.4f", c, 100*(1.01*math.Exp(wantH)-1))
	}
	// Four blocks of 25 pairs: the spread is shared out as Σ(¼)² = ¼.
	blocks := make([]int, 100)
	for i := range blocks {
		blocks[i] = i / 25
	}
	c = Estimate("x", Pairs{Base: b100, Build: c100, Blocks: blocks}, exact)
	if wantH = 1.959963985 * 0.014 / 2; !near(c.High, 100*(1.01*math.Exp(wantH)-1), 1e-3) || c.Blocks != 4 {
		t.Errorf("four blocks: %+v, want high %.4f", c, 100*(1.01*math.Exp(wantH)-1))
	}
	// Blocks of 90 and 10 pairs: 0.9² + 0.1² = 0.82 of it.
	for i := range blocks {
		blocks[i] = i / 90
	}
	c = Estimate("x", Pairs{Base: b100, Build: c100, Blocks: blocks}, exact)
	if wantH = 1.959963985 * 0.014 * math.Sqrt(0.82); !near(c.High, 100*(1.01*math.Exp(wantH)-1), 1e-3) {
		t.Errorf("uneven blocks: %+v, want high %.4f", c, 100*(1.01*math.Exp(wantH)-1))
	}
	// Fewer than two usable pairs.
	if c := Estimate("x", Pairs{Base: []float64{1, 0}, Build: []float64{1, 2}}, known); c.Verdict != VerdictTooFewPairs || c.Pairs != 1 {
		t.Errorf("one pair: %+v", c)
	}
}

// TestEstimateBlocksAlone: with no prior and equal blocks, the interval is
// the classic one on the blocks' means, Student's t on blocks − 1 degrees
// of freedom, whatever the noise within the blocks.
func TestEstimateBlocksAlone(t *testing.T) {
	// Three blocks of two pairs: block means 0.02, 0.00, 0.04 (log ratios),
	// with noise within.
	logs := []float64{0.03, 0.01, -0.005, 0.005, 0.05, 0.03}
	p := Pairs{Blocks: []int{1, 1, 2, 2, 3, 3}}
	for _, x := range logs {
		p.Base, p.Build = append(p.Base, 1), append(p.Build, math.Exp(x))
	}
	c := Estimate("x", p, Options{})
	// The means' sd is 0.02; se = 0.02/√3; t(0.975, 2) = 4.302653.
	se := 0.02 / math.Sqrt(3)
	if !near(c.DF, 2, 1e-9) || !near(c.SELog, se, 1e-12) || !near(c.MeanLog, 0.02, 1e-12) {
		t.Errorf("got df %.6f se %.6f mean %.6f, want 2, %.6f, 0.02", c.DF, c.SELog, c.MeanLog, se)
	}
	if !near(c.High, 100*math.Expm1(0.02+4.302653*se), 1e-6) {
		t.Errorf("high %.6f", c.High)
	}
	if c.SpreadUnknown || c.RunSpread <= 0 {
		t.Errorf("spread %+v", c)
	}
	// One block and no prior: the spread between processes is unknown.
	if c := Estimate("x", Pairs{Base: p.Base, Build: p.Build}, Options{}); !c.SpreadUnknown {
		t.Errorf("one block, no prior: %+v", c)
	}
}

// TestEstimateShrinks: the spread the interval holds lies between the
// prior's and the run's own, nearer the one with more degrees of freedom;
// more blocks move it toward the run's own.
func TestEstimateShrinks(t *testing.T) {
	p := Pairs{}
	for b := range 10 {
		off := 0.05 * float64(b%2*2-1) // the blocks' processes differ by ±5%
		for j := range 8 {
			p.Base = append(p.Base, 1)
			p.Build = append(p.Build, math.Exp(off+0.01*float64(j%3-1)))
			p.Blocks = append(p.Blocks, b)
		}
	}
	own := Estimate("x", p, Options{}).RunSpread
	weak := Estimate("x", p, Options{Prior: Prior{Spread: 0.01, DF: 1}})
	strong := Estimate("x", p, Options{Prior: Prior{Spread: 0.01, DF: 100}})
	if !(own > weak.Spread && weak.Spread > strong.Spread && strong.Spread > 1) {
		t.Errorf("own %.3f, weak prior %.3f, strong prior %.3f", own, weak.Spread, strong.Spread)
	}
	if weak.HalfWidth <= strong.HalfWidth {
		t.Errorf("a prior that says less of the spread than the blocks show narrows the interval: %.3f vs %.3f", weak.HalfWidth, strong.HalfWidth)
	}
}

// TestGate: a threshold is crossed only when the whole interval is beyond
// it, passed only when it is within, and never passed unmeasured.
func TestGate(t *testing.T) {
	at := func(pairs int, low, high float64) Change {
		l, h := math.Log1p(low/100), math.Log1p(high/100)
		return Change{Pairs: pairs, MeanLog: (l + h) / 2, SELog: (h - l) / 2 / tQuantile(maxDF, Level), DF: maxDF}
	}
	for _, tc := range []struct {
		name  string
		c     Change
		op    byte
		limit float64
		want  Outcome
		why   string
	}{
		{"above", at(20, 6, 10), '>', 5, Crossed, ""},
		{"within", at(20, -2, 2), '>', 5, Passed, ""},
		{"straddles", at(20, 3, 9), '>', 5, Inconclusive, ""},
		{"touches from within", at(20, -1, 5), '>', 5, Passed, ""},
		{"faster", at(20, -12, -6), '>', 5, Passed, ""},
		{"fell", at(20, -9, -6), '<', -5, Crossed, ""},
		{"too few pairs", at(9, 50, 60), '>', 5, Inconclusive, "9 pairs measured"},
		{"no pairs", Change{Verdict: VerdictTooFewPairs}, '>', 5, Inconclusive, "0 pairs measured"},
		{"spread unknown", Change{Pairs: 30, SpreadUnknown: true}, '>', 5, Inconclusive, "spread between processes is unknown"},
		{"no interval", Change{Pairs: 30, SELog: math.NaN(), DF: 3}, '>', 5, Inconclusive, "no interval"},
	} {
		v := Check(tc.c, tc.op, tc.limit, Level)
		if v.Outcome != tc.want || !strings.Contains(v.Why, tc.why) || (tc.why != "") != (v.Why != "") {
			t.Errorf("%s: %+v, want outcome %d why %q", tc.name, v, tc.want, tc.why)
		}
	}
	// More thresholds, wider intervals.
	if GateLevel(1) != Level || !near(GateLevel(2), 0.975, 1e-12) {
		t.Errorf("gate levels %v %v", GateLevel(1), GateLevel(2))
	}
	c := at(20, 5.2, 8)
	if Check(c, '>', 5, GateLevel(1)).Outcome != Crossed || Check(c, '>', 5, GateLevel(3)).Outcome != Inconclusive {
		t.Errorf("a 98.3%% interval is wider than the 95%% one")
	}
}
